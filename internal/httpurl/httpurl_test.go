package httpurl_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/das-ask/ask/internal/httpurl"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in       string
		wantErr  error
		wantHost string
	}{
		{"http://127.0.0.1:8080/ask", nil, "127.0.0.1"},
		{"https://idp.example/jwks.json", nil, "idp.example"},
		{"HTTP://X", nil, "X"}, // url.Parse lowers the scheme; the host keeps its case
		{"https://[::1]:8443/", nil, "::1"},
		// url.Parse ends the authority at the first /: this is host u, port 7, path
		// /secret@idp/. Accepted; refusing user info is the caller's part.
		{"https://u:7/secret@idp/", nil, "u"},
		{"http://user:pw@host/", nil, "host"},
		{"", httpurl.ErrEmpty, ""},
		{"http://:8080", httpurl.ErrNoHost, ""},
		{"http://", httpurl.ErrNoHost, ""},
		{"http:host/path", httpurl.ErrNoHost, ""}, // opaque
		{"mailto:x", httpurl.ErrScheme, ""},
		{"ftp://host/", httpurl.ErrScheme, ""},
		{"//host/path", httpurl.ErrNoScheme, ""},
		{"host/path", httpurl.ErrNoScheme, ""},
		{"https://h:443.evil/", httpurl.ErrPort, ""},
		{"https://u:s3cret/x@idp/", httpurl.ErrPort, ""},
		{"http://h/%zz", httpurl.ErrSyntax, ""},
		{"http://h/a b\x00", httpurl.ErrSyntax, ""},
	} {
		u, err := httpurl.Parse(tc.in)
		if !errors.Is(err, tc.wantErr) {
			t.Errorf("Parse(%q): err = %v, want %v", tc.in, err, tc.wantErr)
			continue
		}
		if err != nil {
			if u != nil {
				t.Errorf("Parse(%q) = %v with an error, want nil", tc.in, u)
			}
			if tc.in != "" && strings.Contains(err.Error(), tc.in) {
				t.Errorf("Parse(%q): error %q quotes the input", tc.in, err)
			}
			continue
		}
		if got := u.Hostname(); got != tc.wantHost {
			t.Errorf("Parse(%q).Hostname() = %q, want %q", tc.in, got, tc.wantHost)
		}
	}
}
