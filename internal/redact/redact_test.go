package redact_test

import (
	"testing"

	"github.com/das-ask/ask/internal/redact"
)

func TestURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"http://user:s3cret@host/ask", "http://user:xxxxx@host/ask"},
		{"http://user:s3%2Fcret@host/ask", "http://user:xxxxx@host/ask"},
		{"http://user:p@ss@host/ask", "http://user:xxxxx@host/ask"},
		{"http://user@host/ask", "http://user@host/ask"},
		{"http://host:8080/ask@x", "http://host:8080/ask@x"},
		{"http://127.0.0.1:8080/ask", "http://127.0.0.1:8080/ask"},
		// url.Parse refuses these; the password is hidden all the same.
		{"http://user:s3cret%zz@host/ask", "http://user:xxxxx@host/ask"},
		{"http://user:s3cret@host:port/ask", "http://user:xxxxx@host:port/ask"},
		{"http://user:s3 cret@host/ask", "http://user:xxxxx@host/ask"},
		{"http://user:s3cret@[::1/ask", "http://user:xxxxx@[::1/ask"},
		{"ftp://user:s3cret%zz@host", "ftp://user:xxxxx@host"},
		// A password with a / ? or # not percent-encoded (a base64 one has /): url.Parse reads
		// the authority as ending there, at a host "u:ab" whose port is invalid.
		{"https://u:ab/cd@idp/jwks.json", "https://u:xxxxx@idp/jwks.json"},
		{"https://u:ab?cd@idp/jwks.json", "https://u:xxxxx@idp/jwks.json"},
		{"https://u:ab#cd@idp/jwks.json", "https://u:xxxxx@idp/jwks.json"},
		{"https://u:a/b?c=d@idp/jwks.json?key=k1", "https://u:xxxxx@idp/jwks.json?key=xxxxx"},
		// A query's values may be secrets (?access_token=…, ?api_key=…): the names stay.
		{"https://idp/jwks?k=tok777", "https://idp/jwks?k=xxxxx"},
		{"http://user:s3cret@host/mcp?api_key=AK1&v=2&flag#frag", "http://user:xxxxx@host/mcp?api_key=xxxxx&v=xxxxx&flag#frag"},
		{"http://host/a?x=1;y=2", "http://host/a?x=xxxxx&y=xxxxx"},
		{"http://user:s3cret@host:port/ask?token=abc#f", "http://user:xxxxx@host:port/ask?token=xxxxx#f"},
		{"http://host:port/ask?token=abc", "http://host:port/ask?token=xxxxx"},
		{"http://host/ask?", "http://host/ask?"},
		{"not a url", "not a url"},
		{"%zz", "%zz"},
	} {
		if got := redact.URL(tc.in); got != tc.want {
			t.Errorf("URL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// In hides, in a message quoting a URL (an HTTP client's error), what URL hides of it.
func TestIn(t *testing.T) {
	const raw = "https://u:s3%2Fcret@idp/jwks.json?key=SECRET&v=2"
	for _, tc := range []struct{ msg, want string }{
		{`Get "https://u:***@idp/jwks.json?key=SECRET&v=2": refused`, `Get "https://u:***@idp/jwks.json?key=xxxxx&v=xxxxx": refused`},
		{`Get "https://u:s3/cret@idp/jwks.json": refused`, `Get "https://u:xxxxx@idp/jwks.json": refused`},
		{`Get "https://u:s3%2Fcret@idp/jwks.json": refused`, `Get "https://u:xxxxx@idp/jwks.json": refused`},
		{"no URL here", "no URL here"},
	} {
		if got := redact.In(tc.msg, raw); got != tc.want {
			t.Errorf("In(%q) = %q, want %q", tc.msg, got, tc.want)
		}
	}
	if got := redact.In("x?a=1", "http://host/p"); got != "x?a=1" {
		t.Errorf("a URL without secrets changed the message: %q", got)
	}
}
