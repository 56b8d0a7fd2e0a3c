package server

import "strings"

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
