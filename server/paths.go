package server

import (
	"net/url"
	"strings"
)

// edge (server.go) answers 404 problem+json, before routing and authentication, for a path
// with an empty segment ("//", or a trailing "/") or a dot segment ("." or "..",
// percent-encoded or not), and passes every other request on.
//
// Such a path names no resource here: every segment of every route, the ids in {ticket} and
// {conversation_id} included, is one or more characters and never a dot. So it is answered as
// any other path that matches no route is: 404, the same body as an unknown ticket, for
// everyone alike (it depends on nothing stored, so it shows nothing). It is never redirected
// to the cleaned path, as http.ServeMux does with a 307 that a client follows, POST and all,
// to a different resource (`/v1/asks//events` to a ticket named "events"). An empty {ticket}
// or {conversation_id} is 404 rather than 400 "required": the client did not leave out a
// parameter of an operation, it named a path no operation has, and a 404 is also what the
// trailing-slash form of the same mistake (`/v1/asks/`) gets from the router.
// cleanPath reports whether p (a URL's decoded path) is "/" followed by one or more segments,
// none of them empty, "." or "..".
func cleanPath(p string) bool {
	rest, ok := strings.CutPrefix(p, "/")
	if !ok {
		return false // "*", or an authority-form target: no route here either
	}
	for {
		seg, more, found := strings.Cut(rest, "/")
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
		if !found {
			return true
		}
		rest = more
	}
}

// decodeUnreserved rewrites u's escaped path with every percent-encoded unreserved character
// (RFC 3986 §2.3: ALPHA, DIGIT, "-", ".", "_", "~") written plainly, as §6.2.2.2 normalizes
// it: `/v1/asks/t%5FX` names the same resource as `/v1/asks/t_X`. Echo routes on the escaped
// path when the request had one, and hands the contract's validator its parameters escaped,
// so `t%5FX` was a 400 (the pattern refuses `%`) and `/ask/%761/…` a 404. What stays escaped
// (a reserved character such as `%2F`) keeps the escaped path, and the route and the
// parameter see it as before. Kept out of line: edge's frame stays on every stream's stack.
//
//go:noinline
func decodeUnreserved(u *url.URL) {
	raw := u.RawPath
	var b strings.Builder
	escaped := false
	for i := 0; i < len(raw); i++ {
		if raw[i] == '%' && i+2 < len(raw) {
			if c, ok := unhex(raw[i+1], raw[i+2]); ok && unreserved(c) {
				b.WriteByte(c)
				i += 2
				continue
			}
			escaped = true
		}
		b.WriteByte(raw[i])
	}
	if !escaped {
		u.RawPath = "" // the path is its own encoding now: Echo routes on u.Path
		return
	}
	u.RawPath = b.String()
}

func unhex(hi, lo byte) (byte, bool) {
	h, ok1 := fromHex(hi)
	l, ok2 := fromHex(lo)
	return h<<4 | l, ok1 && ok2
}

func fromHex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}
