package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/labstack/echo/v4"

	"github.com/das-ask/ask/gen"
)

// createAskRoute is createAsk's route in the contract, security dropped as validator drops it.
func createAskRoute(t testing.TB) *routers.Route {
	t.Helper()
	spec, err := gen.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	spec.Servers = openapi3.Servers{{URL: "/"}}
	spec.Security = nil
	for _, item := range spec.Paths.Map() {
		for _, op := range item.Operations() {
			op.Security = nil
		}
	}
	routes, err := echoRoutes(spec, "")
	if err != nil {
		t.Fatal(err)
	}
	r := routes[echoRoute{http.MethodPost, "/v1/conversations/:conversation_id/asks"}]
	if r == nil || !strings.EqualFold(r.Operation.OperationID, "createAsk") || fastValid[echoRoute{r.Method, r.Path}] == nil {
		t.Fatal("no createAsk route with a fast check")
	}
	return r
}

// createAskRequest is a createAsk request as readBody leaves it; key "" sends no Idempotency-Key.
func createAskRequest(body []byte, contentType, key string) *http.Request {
	req := httptest.NewRequest(http.MethodPost, "/v1/conversations/c/asks", nil)
	req.Body = newBodyReader(body)
	req.ContentLength = int64(len(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	return req
}

// verdicts are the fast check's and kin-openapi's on one request.
func verdicts(t testing.TB, route *routers.Route, body []byte, contentType, conv, key string) (fast, kin bool) {
	t.Helper()
	c := echo.New().NewContext(createAskRequest(body, contentType, key), httptest.NewRecorder())
	c.SetParamNames("conversation_id")
	c.SetParamValues(conv)
	fast = createAskValid(c)
	req := createAskRequest(body, contentType, key)
	err := openapi3filter.ValidateRequest(context.Background(), &openapi3filter.RequestValidationInput{
		Request: req, PathParams: map[string]string{"conversation_id": conv}, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true},
	})
	return fast, err == nil
}

// TestCreateAskFast: the check passes the forms clients send (so it is what answers them), and
// never a request kin-openapi refuses.
func TestCreateAskFast(t *testing.T) {
	route := createAskRoute(t)
	const json = "application/json"
	long, astral := strings.Repeat("q", questionMax), strings.Repeat("😀", questionMax)
	for _, tc := range []struct {
		body, ct, conv, key string
		fast                bool // the check passes it (then kin-openapi must too)
	}{
		{`{"question":"How many sev1 incidents did we have in 2026-Q2?"}`, json, "c_ABC-def_0", "", true},
		{" {\n\t\"question\" : \"q\" } \r\n", json, "c", "", true},
		{`{"question":"é \" \\ \u00e9 \n"}`, json, "c", "", true},
		{`{"question":"q","webhook":{"url":"https://example.test/hook"}}`, json, "c", "", true},
		{`{"webhook":{"url":"x"},"question":"q"}`, json, "c", "", true},
		{`{"question":"` + long + `"}`, json, "c", "", true},
		{`{"question":"` + astral + `"}`, json, "c", "", true},
		{`{"question":"q"}`, json, strings.Repeat("a", 64), `"abc:/+=.~_-"`, true},
		{`{"question":"q"}`, json, "c", "0b0e3d5e-6d9f-4e2a-9a55-1f0c9f9d1b2a", true},
		// Not passed: kin-openapi decides (most are refused; some it admits).
		{`{"question":"` + long + `q"}`, json, "c", "", false},
		{`{"question":""}`, json, "c", "", false},
		{`{"Question":"q"}`, json, "c", "", false},
		{`{"question":"q","question":"r"}`, json, "c", "", false},
		{`{"\u0071uestion":"q"}`, json, "c", "", false},
		{`{"question":"q","extra":1}`, json, "c", "", false},
		{`{"question":"q","webhook":{"url":"x","secret":"y"}}`, json, "c", "", false},
		{`{"question":"q","webhook":{}}`, json, "c", "", false},
		{`{"question":"q","webhook":null}`, json, "c", "", false},
		{`{"question":null}`, json, "c", "", false},
		{`{"question":1}`, json, "c", "", false},
		{`{"question":"q"}x`, json, "c", "", false},
		{`{"question":"q"}{"question":"r"}`, json, "c", "", false},
		{`{"question":"q",}`, json, "c", "", false},
		{`{"question":"a` + "\x01" + `"}`, json, "c", "", false},
		{`{"question":"\x"}`, json, "c", "", false},
		{"\ufeff" + `{"question":"q"}`, json, "c", "", false},
		{``, json, "c", "", false},
		{`[]`, json, "c", "", false},
		{`{"question":"q"}`, "text/plain", "c", "", false},
		{`{"question":"q"}`, "", "c", "", false},
		{`{"question":"q"}`, "application/json; charset=utf-8", "c", "", false},
		{`{"question":"q"}`, json, "c.d", "", false},
		{`{"question":"q"}`, json, strings.Repeat("a", 65), "", false},
		{`{"question":"q"}`, json, "", "", false},
		{`{"question":"q"}`, json, "c", "has space", false},
		{`{"question":"q"}`, json, "c", `"unterminated`, false},
		{`{"question":"q"}`, json, "c", strings.Repeat("k", 256), false},
	} {
		fast, kin := verdicts(t, route, []byte(tc.body), tc.ct, tc.conv, tc.key)
		if fast != tc.fast {
			t.Errorf("fast check on %.60q (ct %q, conv %q, key %q) = %v, want %v", tc.body, tc.ct, tc.conv, tc.key, fast, tc.fast)
		}
		if fast && !kin {
			t.Errorf("fast check passed %.60q (ct %q, conv %q, key %q), which kin-openapi refuses", tc.body, tc.ct, tc.conv, tc.key)
		}
	}
}

// TestCreateAskFastBounds holds the check's constants to the contract's.
func TestCreateAskFastBounds(t *testing.T) {
	route := createAskRoute(t)
	body := route.Operation.RequestBody.Value.Content.Get("application/json").Schema.Value
	q, wh := body.Properties["question"].Value, body.Properties["webhook"].Value
	url := wh.Properties["url"].Value
	var conv, key *openapi3.Schema
	for _, p := range route.Operation.Parameters {
		switch p.Value.Name {
		case "conversation_id":
			conv = p.Value.Schema.Value
		case "Idempotency-Key":
			key = p.Value.Schema.Value
		}
	}
	for _, c := range []struct {
		name                 string
		s                    *openapi3.Schema
		min, max             uint64
		pattern, wantPattern string
	}{
		{"question", q, questionMin, questionMax, "", ""},
		{"webhook.url", url, webhookURLMin, webhookMax, "", ""},
		{"conversation_id", conv, 1, conversationIDMax, conv.Pattern, "^[A-Za-z0-9_-]+$"},
		{"Idempotency-Key", key, 1, idempotencyKeyMax, key.Pattern, idempotencyKeyPattern.String()},
	} {
		if c.s.MinLength != c.min || c.s.MaxLength == nil || *c.s.MaxLength != c.max || c.pattern != c.wantPattern {
			t.Errorf("%s: the contract says %d..%v %q; the fast check assumes %d..%d %q", c.name, c.s.MinLength, c.s.MaxLength, c.pattern, c.min, c.max, c.wantPattern)
		}
	}
	if q.Pattern != "" || url.Pattern != "" || len(body.Properties) != 2 || len(wh.Properties) != 1 ||
		body.AdditionalProperties.Has == nil || *body.AdditionalProperties.Has || wh.AdditionalProperties.Has == nil || *wh.AdditionalProperties.Has {
		t.Error("AskRequest's schema changed: the fast check (validate_fast.go) must change with it")
	}
}

func FuzzCreateAskFast(f *testing.F) {
	route := createAskRoute(f)
	f.Add([]byte(`{"question":"How many?"}`), "c_1", "")
	f.Add([]byte(`{"question":"q","webhook":{"url":"https://x.test"}}`), "c", `"k"`)
	f.Add([]byte(` {"question" : "é\u2028\ud83d\ude00"} `), "C-_9", "a:b")
	f.Fuzz(func(t *testing.T, body []byte, conv, key string) {
		if strings.ContainsAny(key, "\r\n\x00") {
			return // not a header value net/http would deliver
		}
		if fast, kin := verdicts(t, route, body, "application/json", conv, key); fast && !kin {
			t.Fatalf("fast check passed %q (conv %q, key %q), which kin-openapi refuses", body, conv, key)
		}
	})
}
