package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"mime"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/das-ask/ask/internal/jsontext"
)

// jsonText refuses, before the contract is checked, a JSON request body that the decoders
// after it would read as something it is not. Go's encoding/json (and kin-openapi, which uses
// it) replaces invalid UTF-8 and unpaired surrogate escapes with U+FFFD, reads only the first
// of several values and keeps only the last of a repeated member name, so without this a
// question would be altered silently (a run started on a question the user did not ask) and
// `{} garbage` would create a conversation. RFC 8259
// §8.1 makes JSON between systems UTF-8, so a body declared in another charset is not
// converted but refused (415), and one that is not one well-formed JSON text in UTF-8 is a 400.
// The details name what is wrong, never the bytes: they could be the question.
//
// A request with more than one Content-Type header is a 400, whatever the body. A body of
// another media type passes on untouched: the validator answers it 415. A Content-Type that
// is not a well-formed media type (RFC 9110 §8.3.1) is a 415 here: the validator would read
// one whose parameters are broken as the type before them. An empty
// body passes too: the contract says where one is allowed.
func jsonText() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			req := c.Request()
			if !onlyIdentity(req.Header.Values("Content-Encoding")) {
				// The body would be read as the bytes it is, a compressed JSON text as garbage
				// (RFC 9110 §15.5.16: an unsupported content coding is a 415, whose
				// Accept-Encoding tells it from a media type's, §12.5.3).
				p := unsupportedMedia("the request body must not be content-encoded (no Content-Encoding, or identity)")
				p.identityOnly = true
				return p
			}
			if len(req.Header.Values(echo.HeaderContentType)) > 1 {
				// Content-Type holds one media type (RFC 9110 §8.3): with two, which one the
				// body is in is anyone's guess (the validator would read the first, a gateway
				// perhaps the last), so it is read as neither.
				return badRequest("the request carries more than one Content-Type header; send exactly one")
			}
			b, err := requestBody(req)
			if err != nil {
				return badRequest("the request body could not be read")
			}
			if len(b) == 0 {
				return next(c)
			}
			if ct := req.Header.Get(echo.HeaderContentType); ct != echo.MIMEApplicationJSON { // the plain form parses to itself
				mt, params, err := mime.ParseMediaType(ct)
				if err != nil && ct != "" { // none at all is the validator's plain 415
					// The validator reads only what comes before the first semicolon, so
					// `application/json; a=b; a=c` is JSON to it, and passing it on would let
					// its body skip every check here. A media type that does not parse
					// declares nothing, and is refused as any other.
					return unsupportedMedia("the request's Content-Type is not a well-formed media type; send application/json")
				}
				if mt != echo.MIMEApplicationJSON {
					return next(c)
				}
				if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
					return unsupportedMedia("the request body must be application/json in UTF-8 (charset=utf-8 or none)")
				}
			}
			if detail, violation := jsonTextProblem(b); detail != "" {
				return badRequest(detail, violation)
			}
			return next(c)
		}
	}
}

// jsonTextProblem says what keeps b from being one JSON text in UTF-8 whose strings decode to
// what they spell, as a detail and a violation worded as the validator's are ("" when nothing
// does).
func jsonTextProblem(b []byte) (detail, violation string) {
	switch {
	case !utf8.Valid(b):
		return "the request body is not valid UTF-8", "body: not valid UTF-8"
	case !json.Valid(b):
		if tooDeep(b) {
			return "the request body nests arrays or objects more than 10000 deep", "body: nested more than 10000 deep"
		}
		return "the request body is not one well-formed JSON value", "body: not well-formed"
	case bytes.IndexByte(b, '\\') >= 0 && jsontext.LoneSurrogate(b):
		return "the request body holds a \\u escape of an unpaired UTF-16 surrogate, which is no character",
			"body: an escaped unpaired surrogate (\\uD800-\\uDFFF)"
	case repeatedName(b):
		return "the request body names a member more than once in one object", "body: a member name repeated in one object"
	}
	return "", ""
}

// tooDeep reports whether json.Valid refused b on reaching its scanner's bound of 10000 nested
// levels (before any other fault, if there is one later): such a body, well-formed, was called
// not well-formed.
func tooDeep(b []byte) bool {
	var se *json.SyntaxError
	return errors.As(json.Unmarshal(b, new(json.RawMessage)), &se) && strings.Contains(se.Error(), "exceeded max depth")
}

// repeatedName reports whether an object in b, a well-formed JSON text (so nested at most
// 10000 deep: json.Valid's bound), names a member more than once, the names compared as they
// decode (`"\u0071"` is `"q"`). RFC 8259 §4 leaves such an object's meaning to the reader, and
// Go's decoders keep the last value: `{"question":"A","question":"B"}` would ask B and drop A
// without a word, and a gateway or filter that reads the first would see another request than
// the service runs. The scan is one pass without recursion; an object's names are compared in
// a slice while they are few and in a map past that, so a body of many names costs linear time.
func repeatedName(b []byte) bool {
	type object struct {
		start int                 // its first name in names; -1 for an array
		set   map[string]struct{} // its names once past smallObject
	}
	const smallObject = 16
	var (
		stackBuf [4]object
		namesBuf [8][]byte
		stack    = stackBuf[:0] // the open objects and arrays, innermost last
		names    = namesBuf[:0] // the raw names (quotes stripped) of the open objects' members
		wantKey  bool           // the next string is a member name
	)
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '{':
			stack = append(stack, object{start: len(names)})
			wantKey = true
		case '[':
			stack = append(stack, object{start: -1})
			wantKey = false
		case '}', ']':
			if top := stack[len(stack)-1]; top.start >= 0 {
				names = names[:top.start]
			}
			stack = stack[:len(stack)-1]
			wantKey = false
		case ',':
			wantKey = len(stack) > 0 && stack[len(stack)-1].start >= 0
		case '"':
			j := i + 1
			for b[j] != '"' {
				if b[j] == '\\' {
					j++
				}
				j++
			}
			if wantKey {
				top := &stack[len(stack)-1]
				name := b[i+1 : j]
				if top.set == nil && len(names)-top.start < smallObject {
					for _, n := range names[top.start:] {
						if sameName(n, name) {
							return true
						}
					}
				} else {
					if top.set == nil {
						top.set = make(map[string]struct{}, 2*smallObject)
						for _, n := range names[top.start:] {
							top.set[decodedName(n)] = struct{}{}
						}
					}
					d := decodedName(name)
					if _, ok := top.set[d]; ok {
						return true
					}
					top.set[d] = struct{}{}
				}
				names = append(names, name)
				wantKey = false
			}
			i = j
		}
	}
	return false
}

// sameName reports whether two raw member names (between their quotes) decode alike.
func sameName(a, b []byte) bool {
	if bytes.IndexByte(a, '\\') < 0 && bytes.IndexByte(b, '\\') < 0 {
		return bytes.Equal(a, b)
	}
	return decodedName(a) == decodedName(b)
}

// decodedName is a raw member name (between its quotes, from a well-formed text) decoded.
func decodedName(raw []byte) string {
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw)
	}
	var s string
	q := make([]byte, 0, len(raw)+2)
	q = append(append(append(q, '"'), raw...), '"')
	_ = json.Unmarshal(q, &s) // well-formed: it decodes
	return s
}

// onlyIdentity reports whether the Content-Encoding values name no coding but identity: each
// is a comma-separated list (RFC 9110 §8.4, §5.3), whose empty elements name nothing, so an
// empty header, or "identity, identity", leaves the body as it is.
func onlyIdentity(values []string) bool {
	for _, v := range values {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				return false
			}
		}
	}
	return true
}
