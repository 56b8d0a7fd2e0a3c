// Package ui serves the reference web page for the ask service: a person signs in, asks a
// question, watches its milestones in the page's own words, reads the answer with its caveats and
// provenance, sees a refusal or an abstention as what it is, cancels with a button and follows up
// in the same conversation.
//
// The page is static (HTML, CSS and one script, embedded) and talks to the ask service on its own
// origin: it expects to be mounted at {base}/ui/ next to the service at {base}, and derives the
// API root from its own address. It is a development aid: the dev stack serves it (demo/stack,
// Options.UI); askd does not.
package ui

import (
	"embed"
	"io/fs"
	"log/slog"
	"net/http"
)

//go:embed static
var static embed.FS

// Options configure New. Zero values mean defaults.
type Options struct {
	// SignIn mints a bearer for a named identity, for the page's development sign-in
	// (POST token). Nil disables that endpoint (404); the page then takes a pasted bearer.
	SignIn SignInFunc
	// Logger receives failures of SignIn; nil discards. Tokens are never logged.
	Logger *slog.Logger
}

// New returns the page's handler, to be mounted with its prefix stripped (it serves "/",
// "/index.html", "/app.js", "/style.css" and, with Options.SignIn, "POST /token").
// Safe for concurrent use.
func New(opts Options) http.Handler {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// fs.Sub fails only for an invalid path name, and "static" is a valid one.
	files, _ := fs.Sub(static, "static")
	mux := http.NewServeMux()
	fileServer := http.FileServerFS(files)
	mux.Handle("GET /", securityHeaders(fileServer))
	if opts.SignIn != nil {
		mux.Handle("POST /token", signIn{mint: opts.SignIn, log: log})
	} else {
		mux.Handle("POST /token", http.NotFoundHandler())
	}
	return mux
}

// securityHeaders confines the page to its own origin: scripts, styles and API calls from 'self'
// only (no inline script, so data rendered as text can never run), never framed, never cached
// stale.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		next.ServeHTTP(w, r)
	})
}
