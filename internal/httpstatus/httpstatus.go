// Package httpstatus names HTTP statuses as RFC 9110 does.
//
// Go's http.StatusText keeps the older names of four statuses RFC 9110 renamed ("Request
// Entity Too Large" for 413, "Unprocessable Entity" for 422, ...). RFC 9457 says an
// about:blank problem's title should be the status's phrase, so the service titles its problems,
// and the clients word a status, with the current names.
package httpstatus

import "net/http"

// Text is the RFC 9110 reason phrase for code, or "" for a code it does not know.
func Text(code int) string {
	switch code {
	case http.StatusRequestEntityTooLarge:
		return "Content Too Large"
	case http.StatusRequestURITooLong:
		return "URI Too Long"
	case http.StatusRequestedRangeNotSatisfiable:
		return "Range Not Satisfiable"
	case http.StatusUnprocessableEntity:
		return "Unprocessable Content"
	}
	return http.StatusText(code)
}

// Known reports whether title is a name of code's status, the current or the one before
// RFC 9110 (which a proxy in front of the service, or an older service, may still send).
func Known(code int, title string) bool {
	return title == Text(code) || title == http.StatusText(code)
}
