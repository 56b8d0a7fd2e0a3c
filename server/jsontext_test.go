package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
)

// TestJSONText: a body that is not one JSON text in UTF-8, or whose object names a member
// twice, is refused before anything is created, with a detail that names the fault and never
// the bytes; one declared in another
// charset is a 415; a surrogate pair escaped as the contract's JSON allows is a character and
// passes. The caps are one conversation and one ask in it, so a refused request that had
// created something would make the good request after it fail.
func TestJSONText(t *testing.T) {
	h := newHarness(t, server.Options{MaxConversationsPerID: 1, MaxTurns: 1})
	post := func(path, ct, body string) *http.Response {
		req := newReq(t, http.MethodPost, path, alice, body)
		ct, enc, _ := strings.Cut(ct, "\x00") // a test's Content-Encoding rides after a NUL
		req.Header.Set("Content-Type", ct)
		if enc != "" {
			req.Header.Set("Content-Encoding", enc)
		}
		return h.do(req)
	}
	const json = "application/json"
	for _, tt := range []struct {
		name, ct, body string
		status         int
		detail         string
	}{
		{"trailing garbage", json, `{} garbage`, 400, "not one well-formed JSON value"},
		{"two values", json, `{}{"x":1}`, 400, "not one well-formed JSON value"},
		{"a value and null", json, `{}null`, 400, "not one well-formed JSON value"},
		{"invalid UTF-8", json, "{\"x\":\"caf\xe9\"}", 400, "not valid UTF-8"},
		{"Latin-1 declared", "application/json; charset=iso-8859-1", `{}`, 415, "in UTF-8"},
		{"gzip-encoded", json + "\x00gzip", `{}`, 415, "content-encoded"},
		{"gzip among identities", json + "\x00identity, gzip", `{}`, 415, "content-encoded"},
		{"a name twice", json, `{"x":1,"x":2}`, 400, "names a member more than once"},
		// Well-formed, but past the nesting the decoder reads (10000): said as that, not as
		// a body that is not JSON.
		{"nested 10001 deep", json, `{"x":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`, 400, "nests arrays or objects more than 10000 deep"},
		// A media type Go's mime cannot parse is still JSON to the validator, which reads only
		// what comes before the first semicolon: without a parse of its own, such a body went
		// past every check above.
		{"a name twice, a parameter twice", "application/json; a=b; a=c", `{"x":1,"x":2}`, 415, "not a well-formed media type"},
		{"trailing garbage, an empty charset", "application/json; charset=", `{} garbage`, 415, "not a well-formed media type"},
		{"no Content-Type", "", `{}`, 415, "must be application/json"},
	} {
		t.Run("createConversation/"+tt.name, func(t *testing.T) {
			resp := post("/ask/v1/conversations", tt.ct, tt.body)
			p := problemOf(t, resp.StatusCode, resp.Header.Get("Content-Type"), readBody(t, resp), tt.status)
			if p.Detail == nil || !strings.Contains(*p.Detail, tt.detail) {
				t.Errorf("detail %v, want it to say %q", p.Detail, tt.detail)
			}
			// RFC 9110 §12.5.3: the 415 for a content coding carries Accept-Encoding, so a
			// client tells it from a media type's, and no other 415 may carry it.
			want := ""
			if strings.Contains(tt.ct, "\x00") {
				want = "identity"
			}
			if got := resp.Header.Get("Accept-Encoding"); got != want {
				t.Errorf("Accept-Encoding %q, want %q", got, want)
			}
		})
	}
	resp := post("/ask/v1/conversations", "application/json; charset=UTF-8", `{}`)
	created := readBody(t, resp)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("a good createConversation after the refused ones: %d %s", resp.StatusCode, created)
	}
	var conv gen.Conversation
	if err := jsonUnmarshal(created, &conv); err != nil {
		t.Fatal(err)
	}
	asks := "/ask/v1/conversations/" + conv.Id + "/asks"
	const secret = "the-question-itself"
	for _, tt := range []struct {
		name, ct, body string
		status         int
		detail         string
	}{
		{"invalid UTF-8 in the question", json, "{\"question\":\"" + secret + " \xff\xfe\"}", 400, "not valid UTF-8"},
		{"a lone high surrogate", json, `{"question":"` + secret + ` \ud800 y"}`, 400, "unpaired UTF-16 surrogate"},
		{"a high surrogate at the end", json, `{"question":"` + secret + ` \ud83d"}`, 400, "unpaired UTF-16 surrogate"},
		{"a high surrogate before another escape", json, `{"question":"` + secret + ` \ud83d\n"}`, 400, "unpaired UTF-16 surrogate"},
		{"a lone low surrogate", json, `{"question":"` + secret + ` \uDC00"}`, 400, "unpaired UTF-16 surrogate"},
		{"trailing garbage", json, `{"question":"` + secret + `"} x`, 400, "not one well-formed JSON value"},
		{"Latin-1 declared", "application/json;charset=latin1", `{"question":"` + secret + `"}`, 415, "in UTF-8"},
		{"Latin-1 declared twice", "application/json; charset=latin1; charset=latin1x", `{"question":"` + secret + `"}`, 415, "not a well-formed media type"},
		{"the question twice, a parameter with no value", "application/json; foo", `{"question":"` + secret + `","question":"How many sev1 incidents?"}`, 415, "not a well-formed media type"},
		{"the question twice, two semicolons", "application/json;;", `{"question":"` + secret + `","question":"How many sev1 incidents?"}`, 415, "not a well-formed media type"},
		{"invalid UTF-8, an unterminated quote", `application/json; x="y`, "{\"question\":\"" + secret + " \xff\"}", 415, "not a well-formed media type"},
		// Decoded, the last of a repeated name wins: the question before it would be dropped
		// without a word, and the run would answer a question the client may not have meant.
		{"the question twice", json, `{"question":"` + secret + `","question":"How many sev1 incidents?"}`, 400, "names a member more than once"},
		{"the question twice, once escaped", json, `{"question":"` + secret + `","\u0071uestion":"x"}`, 400, "names a member more than once"},
		{"the webhook's url twice", json, `{"question":"` + secret + `","webhook":{"url":"https://a.example/","url":"https://b.example/"}}`, 400, "names a member more than once"},
	} {
		t.Run("createAsk/"+tt.name, func(t *testing.T) {
			resp := post(asks, tt.ct, tt.body)
			body := readBody(t, resp)
			p := problemOf(t, resp.StatusCode, resp.Header.Get("Content-Type"), body, tt.status)
			if p.Detail == nil || !strings.Contains(*p.Detail, tt.detail) {
				t.Errorf("detail %v, want it to say %q", p.Detail, tt.detail)
			}
			if strings.Contains(string(body), secret) {
				t.Errorf("the problem echoes the question: %s", body)
			}
		})
	}
	// A pair escaped, high then low, is one character (U+1F600), and the ask is taken.
	resp = post(asks, json, `{"question":"how many \ud83d\ude00 incidents?"}`)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("an ask with an escaped surrogate pair, after the refused ones: %d %s", resp.StatusCode, readBody(t, resp))
	}
}

// TestContentEncodingNamingNoCoding: a Content-Encoding that names no coding but identity (empty,
// a list of identities, empty list elements) leaves the body as it is and is taken; it was a
// 415 unless it was one "identity".
func TestContentEncodingNamingNoCoding(t *testing.T) {
	h := newHarness(t, server.Options{})
	for _, enc := range [][]string{{""}, {"identity, identity"}, {" , identity"}, {"identity", "IDENTITY"}} {
		req := newReq(t, http.MethodPost, "/ask/v1/conversations", alice, `{}`)
		req.Header.Set("Content-Type", "application/json")
		for _, v := range enc {
			req.Header.Add("Content-Encoding", v)
		}
		resp := h.do(req)
		if body := readBody(t, resp); resp.StatusCode != http.StatusCreated {
			t.Errorf("Content-Encoding %q: %d %s, want 201", enc, resp.StatusCode, body)
		}
	}
}

// TestMalformedBearer: an Authorization header that names the Bearer scheme but holds no token
// after a space (none at all, or a tab between) is bearer authentication attempted and
// malformed, a 400 with an invalid_request challenge (RFC 6750 §3.1), where it was answered as
// a request without credentials (a 401 whose challenge has no error). Spaces are tolerated; a
// scheme other than Bearer is still no bearer (a 401 without an error).
func TestMalformedBearer(t *testing.T) {
	h := newHarness(t, server.Options{})
	for _, tc := range []struct {
		header string
		status int
		error  string
	}{
		{"Bearer", 400, "invalid_request"},
		{"Bearer ", 400, "invalid_request"},
		{"bearer   ", 400, "invalid_request"},
		{"Bearer\t" + alice, 400, "invalid_request"},
		{"Bearer  " + alice, 404, ""}, // two spaces: the token, taken (404: no such ticket)
		{"Basic YWxpY2U6cHc=", 401, ""},
		{"Bearerx " + alice, 401, ""},
		{"Bearer not-a-token", 401, "invalid_token"},
	} {
		req := newReq(t, http.MethodGet, "/ask/v1/asks/t_UNKNOWN", "", "")
		req.Header.Set("Authorization", tc.header)
		resp := h.do(req)
		body := readBody(t, resp)
		p := problemOf(t, resp.StatusCode, resp.Header.Get("Content-Type"), body, tc.status)
		chall := resp.Header.Get("WWW-Authenticate")
		switch {
		case tc.status == 404:
		case tc.error == "" && chall != `Bearer realm="das"`:
			t.Errorf("%q: WWW-Authenticate %q, want the realm alone", tc.header, chall)
		case tc.error != "" && !strings.HasPrefix(chall, `Bearer realm="das", error="`+tc.error+`"`):
			t.Errorf("%q: WWW-Authenticate %q, want error=%q", tc.header, chall, tc.error)
		}
		if tc.status == 400 && (p.Detail == nil || !strings.Contains(*p.Detail, "Bearer scheme but holds no token")) {
			t.Errorf("%q: detail %v", tc.header, p.Detail)
		}
		if strings.Contains(string(body), alice) {
			t.Errorf("%q: the problem echoes the token: %s", tc.header, body)
		}
	}
}

// TestRepeatedAuthorization: a request with two Authorization headers is made with neither:
// 400 whichever comes first, where the first used to win, with an invalid_request challenge.
func TestRepeatedAuthorization(t *testing.T) {
	h := newHarness(t, server.Options{})
	cid := h.conv(alice)
	for _, pair := range [][2]string{{alice, "tok-nobody"}, {"tok-nobody", alice}, {alice, bob}} {
		for _, r := range []struct{ method, path, body string }{
			{http.MethodPost, "/ask/v1/conversations", `{}`},
			{http.MethodPost, "/ask/v1/conversations/" + cid + "/asks", `{"question":"q?"}`},
			{http.MethodGet, "/ask/v1/asks/t_UNKNOWN", ""},
		} {
			req := newReq(t, r.method, r.path, "", r.body)
			req.Header.Add("Authorization", "Bearer "+pair[0])
			req.Header.Add("Authorization", "Bearer "+pair[1])
			resp := h.do(req)
			body := readBody(t, resp)
			p := problemOf(t, resp.StatusCode, resp.Header.Get("Content-Type"), body, http.StatusBadRequest)
			if p.Detail == nil || !strings.Contains(*p.Detail, "more than one Authorization header") {
				t.Errorf("%s %s: detail %v", r.method, r.path, p.Detail)
			}
			if strings.Contains(string(body), alice) || strings.Contains(string(body), bob) {
				t.Errorf("the problem echoes a token: %s", body)
			}
			// RFC 6750 §3: a request without a usable credential gets a Bearer challenge,
			// here with §3.1's invalid_request.
			if got, want := resp.Header.Get("WWW-Authenticate"), `Bearer realm="das", error="invalid_request"`; !strings.HasPrefix(got, want) {
				t.Errorf("%s %s: WWW-Authenticate %q, want it to start %q", r.method, r.path, got, want)
			}
		}
	}
}
