package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	askconfig "github.com/das-ask/ask/config"
)

// The bearer and the webhook URL (which may itself be a credential) come from the environment
// when no flag gives them, but never appear in the usage a mistyped flag or -h prints to stderr
// (a CI log). Until 2026-12-05 they were the flags' defaults, and the usage printed both.
func TestUsageNeverShowsTheTokenOrWebhook(t *testing.T) {
	const token = "eyJhbGciOiJSUzI1NiJ9.eyJvaWQiOiJhbGljZSJ9.c2VjcmV0LXNpZ25hdHVyZQ"
	const hook = "https://hooks.example/services/T0K3N-in-the-path"
	env := askconfig.MapEnv(map[string]string{"ASK_URL": "http://ask.test/ask", "ASK_TOKEN": token, "ASK_WEBHOOK": hook, "XDG_STATE_HOME": t.TempDir()})
	for _, args := range [][]string{{"--no-such-flag", "q"}, {"-h"}, {"--token"}} {
		var stderr bytes.Buffer
		if c, _ := parseArgs(args, &stderr, env); c != nil {
			t.Fatalf("parseArgs(%q) = %+v, want a usage error", args, c)
		}
		if !strings.Contains(stderr.String(), "-token") {
			t.Fatalf("parseArgs(%q) printed no usage: the check would prove nothing: %q", args, stderr.String())
		}
		for name, secret := range map[string]string{"token": token, "webhook": hook} {
			if strings.Contains(stderr.String(), secret) {
				t.Errorf("parseArgs(%q) printed the %s from the environment: %q", args, name, stderr.String())
			}
		}
	}
	c, _ := parseArgs([]string{"q"}, &bytes.Buffer{}, env)
	if c == nil || c.token != token || c.webhook != hook {
		t.Fatalf("without flags, the token and webhook are not the environment's: %+v", c)
	}
	c, _ = parseArgs([]string{"--token", "flag-token", "--webhook", "https://other.example/h", "q"}, &bytes.Buffer{}, env)
	if c == nil || c.token != "flag-token" || c.webhook != "https://other.example/h" {
		t.Fatalf("the flags do not win over the environment: %+v", c)
	}
}

// A password in the service's URL (http://user:password@host/ask, $ASK_URL) is a credential:
// ask shows the URL with it redacted, as the client library's errors and net/http's do, in every
// message and in the usage, and keeps it out of the state file. Until 2026-12-05 "cannot reach
// the ask service at http://u:s3cret@…", the 404 of a wrong base path, "the service at … holds no
// ticket" and a mistyped flag's usage (the flag's default) printed it, and --continue wrote it to
// disk.
func TestURLPasswordNeverShown(t *testing.T) {
	const password = "s3cret-pw"
	f := start(t)
	withPassword := func(u string) string { return strings.Replace(u, "http://", "http://user:"+password+"@", 1) }
	dead := withPassword("http://127.0.0.1:1/ask")
	for _, tc := range []struct {
		name string
		url  string
		args []string
		code int
		want string // what stderr must say, so the check proves something
	}{
		{"nothing listens", dead, []string{"answer"}, exitFailure, "cannot reach the ask service at http://user:xxxxx@127.0.0.1:1/ask"},
		{"a wrong base path", withPassword(strings.TrimSuffix(f.url, "/ask") + "/nope"), []string{"answer"}, exitFailure, "no ask service at http://user:xxxxx@"},
		{"an unknown ticket", withPassword(f.url), []string{"--follow", "t_NOSUCHTICKETAAAAAAAAAAAAAAA"}, exitFailure, "the service at http://user:xxxxx@"},
		{"not an http URL", "ftp://user:" + password + "@host/ask", []string{"answer"}, exitFailure, `is "ftp://user:xxxxx@host/ask"`},
		{"a mistyped flag's usage", dead, []string{"--no-such-flag", "answer"}, exitFailure, "-url"},
		{"an answer, remembered", withPassword(f.url), []string{"answer"}, exitAnswer, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := f.env(t, "ASK_URL", tc.url)
			code, stdout, stderr := f.run(t.Context(), env, tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, stderr, tc.code, tc.want)
			}
			if strings.Contains(stdout+stderr, password) {
				t.Errorf("the URL's password was shown: stdout %q, stderr %q", stdout, stderr)
			}
			cfg, err := askconfig.ClientFromEnv(env)
			if err != nil {
				t.Fatal(err)
			}
			var files []string
			_ = filepath.WalkDir(cfg.StateDir, func(path string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					files = append(files, path)
				}
				return nil
			})
			if tc.code == exitAnswer && len(files) == 0 {
				t.Fatalf("no state file in %s: the check of it would prove nothing", cfg.StateDir)
			}
			for _, name := range files {
				if b, _ := os.ReadFile(name); bytes.Contains(b, []byte(password)) {
					t.Errorf("%s holds the URL's password: %s", name, b)
				}
			}
		})
	}
}

// A --url (or $ASK_URL) that url.Parse refuses — a bad percent-escape or port, a space in the
// password — is quoted by the usage error, and by a mistyped flag's usage as the flag's default:
// its password is hidden there too. redacted returned such a URL as given, password and all.
func TestUnparseableURLPasswordNeverShown(t *testing.T) {
	const password = "s3cret"
	for _, u := range []string{
		"http://user:s3cret%zz@host/ask",
		"http://user:s3cret@host:port/ask",
		"http://user:s3cret x@host/ask",
	} {
		for _, tc := range []struct {
			name string
			args []string
			env  string
		}{
			{"--url", []string{"--url", u, "q"}, "http://ask.test/ask"},
			{"$ASK_URL", []string{"q"}, u},
			{"a mistyped flag's usage", []string{"--no-such-flag", "q"}, u},
		} {
			var stderr bytes.Buffer
			env := askconfig.MapEnv(map[string]string{"ASK_URL": tc.env, "ASK_TOKEN": "tok", "XDG_STATE_HOME": t.TempDir()})
			if c, _ := parseArgs(tc.args, &stderr, env); c != nil {
				t.Fatalf("%s %q: parseArgs = %+v, want a usage error", tc.name, u, c)
			}
			if !strings.Contains(stderr.String(), "user:xxxxx@") {
				t.Fatalf("%s %q: the URL is not shown redacted, the check would prove nothing: %q", tc.name, u, stderr.String())
			}
			if strings.Contains(stderr.String(), password) {
				t.Errorf("%s %q: the password was shown: %q", tc.name, u, stderr.String())
			}
		}
	}
}

// A token that cannot be a bearer, most often pasted with its header's scheme ("Bearer eyJ…"),
// is a usage error before anything is sent, worded for the person and without the token, for
// ask, --follow and --cancel alike. It was sent, and each failed as "ask createConversation:
// client: token source: the token holds white space … at byte 6", --follow adding "(ask --follow
// t_… tries again)", which could never help.
func TestTokenThatIsNotABearerIsAUsageError(t *testing.T) {
	const token = "eyJhbGciOiJSUzI1NiJ9.eyJvaWQiOiJhbGljZSJ9.c2VjcmV0LXNpZ25hdHVyZQ"
	for _, c := range []struct {
		name, token, want string
	}{
		{"scheme", "Bearer " + token, `ask: the token from --token (or $ASK_TOKEN): the token starts with "Bearer ": give the token alone`},
		{"scheme, lower case", "bearer " + token, `starts with "Bearer "`},
		{"two words", token + " x", "holds white space or a control character at byte 64"},
		{"tab", token[:10] + "\t" + token[10:], "at byte 10"},
	} {
		for _, args := range [][]string{{"q"}, {"--follow", "t_ABC"}, {"--cancel", "t_ABC"}} {
			for _, viaEnv := range []bool{false, true} {
				vars := map[string]string{"ASK_URL": "http://ask.test/ask", "XDG_STATE_HOME": t.TempDir()}
				a := args
				if viaEnv {
					vars["ASK_TOKEN"] = c.token
				} else {
					a = append([]string{"--token", c.token}, args...)
				}
				var stderr bytes.Buffer
				cfg, code := parseArgs(a, &stderr, askconfig.MapEnv(vars))
				if cfg != nil || code != exitFailure || !strings.Contains(stderr.String(), c.want) {
					t.Errorf("%s, %q (env %v): config %v, exit %d, stderr %q; want exit 1 and %q", c.name, args, viaEnv, cfg != nil, code, stderr.String(), c.want)
				}
				if strings.Contains(stderr.String(), token[20:]) {
					t.Errorf("%s, %q: the message shows the token: %q", c.name, args, stderr.String())
				}
			}
		}
	}
	if cfg, _ := parseArgs([]string{"--token", token, "q"}, &bytes.Buffer{}, askconfig.MapEnv(map[string]string{"XDG_STATE_HOME": t.TempDir()})); cfg == nil || cfg.token != token {
		t.Fatalf("a bearer token is refused: %+v", cfg)
	}
}

// --as names whom a token is minted for; a token given asks as its own identity. An --as naming
// someone else beside it is a usage error: it was ignored, and make ask AS=bob with alice's
// token in $ASK_TOKEN asked as alice, shown alice's data for bob's question.
func TestAsThatIsNotTheTokensIdentityIsAUsageError(t *testing.T) {
	const alice = "eyJhbGciOiJSUzI1NiJ9.eyJvaWQiOiJhbGljZSJ9.c2VjcmV0LXNpZ25hdHVyZQ" // {"oid":"alice"}
	env := func(vars ...string) func(string) (string, bool) {
		m := map[string]string{"ASK_URL": "http://ask.test/ask", "XDG_STATE_HOME": t.TempDir()}
		for i := 0; i+1 < len(vars); i += 2 {
			m[vars[i]] = vars[i+1]
		}
		return askconfig.MapEnv(m)
	}
	for _, c := range []struct {
		name string
		args []string
		env  func(string) (string, bool)
	}{
		{"flag", []string{"--as", "bob", "--token", alice, "q"}, env()},
		{"ASK_TOKEN", []string{"--as", "bob", "q"}, env("ASK_TOKEN", alice)},
		{"--follow", []string{"--as", "bob", "--follow", "t_ABC"}, env("ASK_TOKEN", alice)},
	} {
		var stderr bytes.Buffer
		cfg, code := parseArgs(c.args, &stderr, c.env)
		if want := "ask: --as bob, but the token from --token (or $ASK_TOKEN) is alice's"; cfg != nil || code != exitFailure || !strings.HasPrefix(stderr.String(), want) {
			t.Errorf("%s: config %v, exit %d, stderr %q; want exit 1 and %q", c.name, cfg != nil, code, stderr.String(), want)
		}
		if strings.Contains(stderr.String(), alice[20:]) {
			t.Errorf("%s: the message shows the token: %q", c.name, stderr.String())
		}
	}
	for _, c := range []struct {
		name string
		args []string
		env  func(string) (string, bool)
	}{
		{"--as the token's own", []string{"--as", "alice", "--token", alice, "q"}, env()},
		{"ASK_OID beside a token", []string{"q"}, env("ASK_OID", "bob", "ASK_TOKEN", alice)},
		{"a token whose identity cannot be read", []string{"--as", "bob", "--token", "opaque", "q"}, env()},
	} {
		var stderr bytes.Buffer
		if cfg, code := parseArgs(c.args, &stderr, c.env); cfg == nil {
			t.Errorf("%s: exit %d, stderr %q; want it accepted", c.name, code, stderr.String())
		}
	}
}
