package ui_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/das-ask/ask/demo/ui"
)

func serve(t *testing.T, h http.Handler, method, target, remote, host, body string) *http.Response {
	t.Helper()
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	r.RemoteAddr = remote
	if host != "" {
		r.Host = host
	}
	if body != "" {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Result()
}

func TestPageIsServedConfinedToItsOrigin(t *testing.T) {
	h := ui.New(ui.Options{})
	for _, tc := range []struct{ path, contentType, contains string }{
		{"/", "text/html", `<script src="app.js" defer></script>`},
		{"/app.js", "text/javascript", "function milestoneWords"},
		{"/style.css", "text/css", ".outcome.refusal"},
	} {
		resp := serve(t, h, http.MethodGet, tc.path, "127.0.0.1:5000", "", "")
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", tc.path, resp.StatusCode)
		}
		if got := resp.Header.Get("Content-Type"); !strings.HasPrefix(got, tc.contentType) {
			t.Errorf("GET %s: Content-Type %q, want %s", tc.path, got, tc.contentType)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "connect-src 'self'") {
			t.Errorf("GET %s: CSP %q does not confine scripts and calls to the page's origin", tc.path, csp)
		}
		if !strings.Contains(string(b), tc.contains) {
			t.Errorf("GET %s: body lacks %q", tc.path, tc.contains)
		}
	}
	// No inline script anywhere: the CSP forbids it, so the page would silently not work.
	resp := serve(t, h, http.MethodGet, "/", "127.0.0.1:5000", "", "")
	b, _ := io.ReadAll(resp.Body)
	if strings.Contains(string(b), "<script>") || strings.Contains(string(b), " onclick=") {
		t.Error("index.html has inline script, which its CSP blocks")
	}
}

func TestSignIn(t *testing.T) {
	var gotOID string
	h := ui.New(ui.Options{SignIn: func(_ context.Context, oid string) (string, error) {
		gotOID = oid
		if oid == "broken" {
			return "", errors.New("mint failed")
		}
		return "token-for-" + oid, nil
	}})
	form := func(oid string) string { return url.Values{"oid": {oid}}.Encode() }
	for _, tc := range []struct {
		name, remote, host, body string
		want                     int
	}{
		{"loopback caller, loopback host", "127.0.0.1:5000", "127.0.0.1:8080", form("alice"), http.StatusOK},
		{"localhost by name", "[::1]:5000", "localhost:8080", form("bob"), http.StatusOK},
		{"a caller from elsewhere", "192.0.2.7:5000", "127.0.0.1:8080", form("alice"), http.StatusForbidden},
		{"a rebound DNS name", "127.0.0.1:5000", "attacker.example:8080", form("alice"), http.StatusForbidden},
		{"no oid", "127.0.0.1:5000", "127.0.0.1:8080", "", http.StatusBadRequest},
		{"an oid that is not a name", "127.0.0.1:5000", "127.0.0.1:8080", form("alice bob"), http.StatusBadRequest},
		{"the IdP fails", "127.0.0.1:5000", "127.0.0.1:8080", form("broken"), http.StatusInternalServerError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gotOID = ""
			resp := serve(t, h, http.MethodPost, "/token", tc.remote, tc.host, tc.body)
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.want)
			}
			if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
				t.Errorf("Cache-Control %q, want no-store", cc)
			}
			var body map[string]string
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if tc.want == http.StatusOK {
				if body["access_token"] != "token-for-"+gotOID || gotOID == "" {
					t.Errorf("access_token %q for oid %q", body["access_token"], gotOID)
				}
				return
			}
			if body["access_token"] != "" {
				t.Error("a refused sign-in carries a token")
			}
			if tc.want == http.StatusInternalServerError && strings.Contains(body["error"], "mint failed") {
				t.Error("the internal failure leaks into the response")
			}
		})
	}
}

func TestWithoutSignInTheEndpointDoesNotExist(t *testing.T) {
	resp := serve(t, ui.New(ui.Options{}), http.MethodPost, "/token", "127.0.0.1:5000", "127.0.0.1:8080", "oid=alice")
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("status %d, want 404 (the page then offers a pasted bearer)", resp.StatusCode)
	}
}

// TestQuestionBoxTakesEveryValidQuestion: the browser counts a textarea's maxlength in UTF-16
// units, the contract a question's 4000 in code points, so the box's bound is the UTF-16 length
// of the longest valid question (4000 characters outside the BMP, such as emoji: 8000 units).
// A bound of 4000 stopped typing at 2000 emoji; the service refuses what is over 4000 code
// points itself, and the page shows its reason.
func TestQuestionBoxTakesEveryValidQuestion(t *testing.T) {
	resp := serve(t, ui.New(ui.Options{}), http.MethodGet, "/", "127.0.0.1:5000", "", "")
	b, _ := io.ReadAll(resp.Body)
	page := string(b)
	i := strings.Index(page, `<textarea id="question"`)
	if i < 0 {
		t.Fatal("no question box")
	}
	box := page[i : i+strings.Index(page[i:], ">")]
	if !strings.Contains(box, `maxlength="8000"`) {
		t.Errorf("the question box %s: want maxlength=\"8000\" (4000 code points in UTF-16 units, at most)", box)
	}
}

// A form another web site posts to the sign-in from the developer's browser is refused: that site
// cannot read the token, but would have the browser mint one for whoever it names. The page's own
// request (same origin) and one that is not a browser's (no Origin, no Sec-Fetch-Site) pass.
func TestSignInRefusesAnotherOrigin(t *testing.T) {
	h := ui.New(ui.Options{SignIn: func(_ context.Context, oid string) (string, error) { return "token-for-" + oid, nil }})
	for _, tc := range []struct {
		name    string
		headers map[string]string
		want    int
	}{
		{"another site's form", map[string]string{"Origin": "http://attacker.example", "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"another port on loopback", map[string]string{"Origin": "http://127.0.0.1:9999", "Sec-Fetch-Site": "same-site"}, http.StatusForbidden},
		{"an Origin only, of another site", map[string]string{"Origin": "http://attacker.example"}, http.StatusForbidden},
		{"the page itself", map[string]string{"Origin": "http://127.0.0.1:8080", "Sec-Fetch-Site": "same-origin"}, http.StatusOK},
		{"an Origin only, the page's", map[string]string{"Origin": "http://127.0.0.1:8080"}, http.StatusOK},
		{"not a browser", nil, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/token", strings.NewReader(url.Values{"oid": {"alice"}}.Encode()))
			r.RemoteAddr, r.Host = "127.0.0.1:5000", "127.0.0.1:8080"
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			for k, v := range tc.headers {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.want {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.want, w.Body)
			}
			if tc.want != http.StatusOK && strings.Contains(w.Body.String(), "token-for-") {
				t.Error("a refused sign-in carries a token")
			}
		})
	}
}
