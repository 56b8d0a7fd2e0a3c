package server

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/store"
)

// envelope is what every event carries besides its body.
type envelope struct {
	seq          int64
	ticket, conv string
	ts           time.Time
	typ          gen.EventType
}

// encodeEvent encodes one event once, as the log keeps it and the SSE writer sends it: the
// envelope, then the fields of body (a gen.*Body, which has no envelope fields) spliced in.
func encodeEvent(env envelope, body any) (store.Event, error) {
	var b []byte // body's JSON, when it is not one of the service's own (bodies.go)
	size, own := ownBody(body)
	if !own {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return store.Event{}, err
		}
		size = len(b)
	}
	// The envelope's fixed text and its timestamp take under 100 bytes.
	out := make([]byte, 0, 100+len(env.ticket)+len(env.conv)+len(env.typ)+size)
	out = append(out, `{"seq":`...)
	out = strconv.AppendInt(out, env.seq, 10)
	out = append(out, `,"ticket":`...)
	out = appendJSONString(out, env.ticket)
	out = append(out, `,"conversation_id":`...)
	out = appendJSONString(out, env.conv)
	out = append(out, `,"ts":"`...)
	out = env.ts.UTC().AppendFormat(out, time.RFC3339Nano)
	out = append(out, `","type":"`...)
	out = append(out, env.typ...)
	out = append(out, '"')
	at := len(out)
	if own {
		out, _ = appendBody(out, body)
	} else {
		out = append(out, b...)
	}
	// The body is an object, `{...}`: its fields follow the envelope's, and `{}` adds nothing.
	if len(out)-at > 2 {
		out[at] = ','
	} else {
		out = append(out[:at], '}')
	}
	return store.Event{Seq: env.seq, Type: env.typ, Data: out}, nil
}

// appendJSONString appends s as a JSON string, exactly as json.Marshal would: ids are plain
// ASCII and take the fast path (no allocation); anything else goes through json.Marshal.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(dst, q...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}
