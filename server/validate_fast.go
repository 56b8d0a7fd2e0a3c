package server

import (
	"encoding/json"
	"net/http"
	"regexp"
	"unicode/utf16"

	"github.com/labstack/echo/v4"
)

// The contract is checked by kin-openapi (validate.go) on every request. For createAsk, the one
// request every ask makes, that check costs more CPU than the handler's own work (the body
// decoded into `any`, the parameters decoded by style, a schema walk, and their garbage), so a
// narrow check answers first: it passes a request only when the request certainly satisfies
// the contract — the plain form every client sends — and passes everything else, valid or not,
// to kin-openapi, which decides and words the problem. It never refuses anything, so the
// contract's verdicts and messages are kin-openapi's alone; FuzzCreateAskFast holds it to
// never passing a request kin-openapi refuses.
//
// The body it passes is one JSON object, with only space around it and between its tokens,
// holding "question" (a string) once and "webhook" at most once (an object holding "url", a
// string, once), each key spelled exactly, strings within their lengths; a path's
// conversation_id of 1–64 characters from the pattern's set; no Idempotency-Key or one that
// matches its pattern; and a Content-Type of application/json. Anything else goes to kin-openapi.

// The createAsk contract's bounds (openapi/ask.openapi.yaml: AskRequest, WebhookRequest,
// ConversationPath, IdempotencyKey). TestCreateAskFastBounds holds them to the document.
const (
	questionMin, questionMax  = 1, 4000
	webhookURLMin, webhookMax = 1, 2048
	conversationIDMax         = 64
	idempotencyKeyMax         = 257
)

var idempotencyKeyPattern = regexp.MustCompile(`^("[A-Za-z0-9._~:+/=-]{1,255}"|[A-Za-z0-9._~:+/=-]{1,255})$`)

// createAskValid reports whether c's request (its body as readBody left it) certainly
// satisfies createAsk's contract. false says nothing: kin-openapi decides then.
func createAskValid(c echo.Context) bool {
	req := c.Request()
	if ct := req.Header.Values(echo.HeaderContentType); len(ct) != 1 || ct[0] != echo.MIMEApplicationJSON {
		return false
	}
	if !conversationIDValid(c.Param("conversation_id")) {
		return false
	}
	if keys := req.Header.Values("Idempotency-Key"); len(keys) > 1 ||
		len(keys) == 1 && (len(keys[0]) > idempotencyKeyMax || !idempotencyKeyPattern.MatchString(keys[0])) {
		return false
	}
	br, ok := req.Body.(*bodyReader)
	return ok && askRequestValid(br.b)
}

// conversationIDValid: 1 to conversationIDMax characters from [A-Za-z0-9_-].
func conversationIDValid(id string) bool {
	if len(id) == 0 || len(id) > conversationIDMax {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// askRequestValid reports whether b is certainly a valid AskRequest (see above).
func askRequestValid(b []byte) bool {
	p := jsonScan{b: b}
	var question, webhook bool
	ok := p.object(func(key []byte) bool {
		switch string(key) {
		case "question":
			if question {
				return false
			}
			question = true
			return p.stringWithin(questionMin, questionMax)
		case "webhook":
			if webhook {
				return false
			}
			webhook = true
			var url bool
			return p.object(func(key []byte) bool {
				if string(key) != "url" || url {
					return false
				}
				url = true
				return p.stringWithin(webhookURLMin, webhookMax)
			}) && url
		}
		return false
	})
	p.space()
	return ok && question && p.i == len(p.b)
}

// jsonScan reads the few JSON forms askRequestValid passes; each method reports false for
// anything else, which only ever means "not certainly valid".
type jsonScan struct {
	b []byte
	i int
}

func (p *jsonScan) space() {
	for p.i < len(p.b) && (p.b[p.i] == ' ' || p.b[p.i] == '\t' || p.b[p.i] == '\n' || p.b[p.i] == '\r') {
		p.i++
	}
}

func (p *jsonScan) byte(c byte) bool {
	p.space()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// object reads `{ "key": value, … }`, value read by member, which is called with each key
// (its raw text, which has no escape); `{}` is an object too.
func (p *jsonScan) object(member func(key []byte) bool) bool {
	if !p.byte('{') {
		return false
	}
	if p.byte('}') {
		return true
	}
	for {
		p.space()
		key, plain, ok := p.str()
		if !ok || !plain || !p.byte(':') {
			return false
		}
		p.space()
		if !member(key) {
			return false
		}
		if p.byte('}') {
			return true
		}
		if !p.byte(',') {
			return false
		}
	}
}

// str reads a string token and returns its raw text between the quotes; plain says it has
// neither an escape nor a byte outside printable ASCII, so its text is its value. A control
// character ends it as invalid.
func (p *jsonScan) str() (raw []byte, plain, ok bool) {
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return nil, false, false
	}
	start := p.i + 1
	plain = true
	for j := start; j < len(p.b); j++ {
		switch c := p.b[j]; {
		case c == '"':
			p.i = j + 1
			return p.b[start:j], plain, true
		case c == '\\':
			plain = false
			j++ // the escaped character (json.Unmarshal checks the escape)
		case c < 0x20:
			return nil, false, false
		case c >= 0x7f:
			plain = false
		}
	}
	return nil, false, false
}

// stringWithin reads a string whose length, counted as kin-openapi counts it (visitJSONString),
// is within min and max.
func (p *jsonScan) stringWithin(min, max int) bool {
	at := p.i
	raw, plain, ok := p.str()
	if !ok {
		return false
	}
	n := len(raw)
	if !plain {
		var s string
		if json.Unmarshal(p.b[at:p.i], &s) != nil {
			return false
		}
		n = 0
		for _, r := range s {
			if utf16.IsSurrogate(r) {
				n += 2
			} else {
				n++
			}
		}
	}
	return min <= n && n <= max
}

// fastValid are the operations with such a check, by method and the contract's path.
var fastValid = map[echoRoute]func(echo.Context) bool{
	{http.MethodPost, "/v1/conversations/{conversation_id}/asks"}: createAskValid, // createAsk
}
