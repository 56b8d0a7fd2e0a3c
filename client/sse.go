package client

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
	"time"
)

// frame is one dispatched Server-Sent Event.
type frame struct {
	// id is the stream's last event ID when this frame was dispatched (WHATWG: it persists
	// across frames until the server sets it again).
	id string
	// typ is the event type; "message" when the server named none.
	typ string
	// data is the data buffer with the final line feed removed.
	data string
}

// dataPrefix is the longest way a data line starts ("data:" and the one space the rules strip):
// a line may be that much longer than the bound, so that data of the bound on one line, as the
// service sends every event, is read.
const dataPrefix = "data: "

// errFrameTooLarge is returned when one line's value or one event's data exceeds the parser's bound.
var errFrameTooLarge = errors.New("client: event stream frame exceeds the size limit")

// sseParser reads Server-Sent Events incrementally per the WHATWG HTML "event stream
// interpretation" rules: lines end in CRLF, LF or CR; a leading BOM is dropped; lines starting
// with ':' are comments; "data" lines accumulate with '\n'; "id" without NUL sets the last event
// ID; "retry" with only ASCII digits sets the reconnection time; unknown fields are ignored; a
// blank line dispatches, and an event with an empty data buffer is not dispatched. A partial event
// at end of input is discarded.
//
// It never reads ahead beyond the current line, so a frame is returned as soon as its blank line
// arrives. Not safe for concurrent use.
type sseParser struct {
	r       *bufio.Reader
	maxSize int

	line     []byte
	skipLF   bool // the previous line ended in CR; a following LF belongs to it
	started  bool // the BOM check has been made
	lastID   string
	idBuf    string
	typeBuf  string
	dataBuf  strings.Builder
	retry    time.Duration
	retrySet bool
}

// newSSEParser reads from r. lastID is the last event ID carried over from an earlier
// connection; maxSize bounds one line and one event's data (0 means 16 MiB).
func newSSEParser(r io.Reader, lastID string, maxSize int) *sseParser {
	if maxSize <= 0 {
		maxSize = 16 << 20
	}
	return &sseParser{r: bufio.NewReader(r), maxSize: maxSize, lastID: lastID, idBuf: lastID}
}

// LastID is the last event ID seen so far (the value to send as Last-Event-ID).
func (p *sseParser) LastID() string { return p.lastID }

// Retry reports the reconnection time the server last set with a "retry" field.
func (p *sseParser) Retry() (time.Duration, bool) { return p.retry, p.retrySet }

// Next returns the next dispatched frame. At end of input it returns io.EOF (a partial event
// is discarded); any read error is returned as is.
func (p *sseParser) Next() (frame, error) {
	for {
		line, err := p.readLine()
		if err != nil {
			return frame{}, err
		}
		f, ok, err := p.process(line)
		if err != nil {
			return frame{}, err
		}
		if ok {
			return f, nil
		}
	}
}

// readLine returns one line without its terminator.
func (p *sseParser) readLine() ([]byte, error) {
	p.line = p.line[:0]
	for {
		b, err := p.r.ReadByte()
		if err != nil {
			return nil, err
		}
		if !p.started {
			p.started = true
			// U+FEFF as UTF-8 at the very start of the stream is dropped.
			if b == 0xEF {
				if rest, perr := p.r.Peek(2); perr == nil && rest[0] == 0xBB && rest[1] == 0xBF {
					_, _ = p.r.Discard(2)
					continue
				}
			}
		}
		if p.skipLF {
			p.skipLF = false
			if b == '\n' {
				continue
			}
		}
		switch b {
		case '\r':
			p.skipLF = true
			return p.line, nil
		case '\n':
			return p.line, nil
		}
		if len(p.line) >= p.maxSize+len(dataPrefix) {
			return nil, errFrameTooLarge
		}
		p.line = append(p.line, b)
	}
}

// process applies one line and reports a frame when the line dispatches one.
func (p *sseParser) process(line []byte) (frame, bool, error) {
	if len(line) == 0 {
		f, ok := p.dispatch()
		return f, ok, nil
	}
	if line[0] == ':' {
		return frame{}, false, nil
	}
	field, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		field, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	// readLine lets a line pass the bound by a data line's prefix; no field's value may.
	if len(value) > p.maxSize {
		return frame{}, false, errFrameTooLarge
	}
	switch string(field) {
	case "event":
		p.typeBuf = string(value)
	case "data":
		// The event's data is its lines joined by '\n' (the buffer holds each with its '\n', the
		// last dropped at dispatch), so the bound is on the buffer less that last '\n': data of
		// exactly maxSize bytes is read, as the Python and TypeScript clients and the docs say
		// ("an event's data over N bytes").
		if p.dataBuf.Len()+len(value) > p.maxSize {
			return frame{}, false, errFrameTooLarge
		}
		p.dataBuf.Write(value)
		p.dataBuf.WriteByte('\n')
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			p.idBuf = string(value)
		}
	case "retry":
		if n, ok := digits(value); ok {
			p.retry, p.retrySet = time.Duration(n)*time.Millisecond, true
		}
	}
	return frame{}, false, nil
}

// dispatch ends the current event.
func (p *sseParser) dispatch() (frame, bool) {
	p.lastID = p.idBuf
	if p.dataBuf.Len() == 0 {
		p.dataBuf.Reset()
		p.typeBuf = ""
		return frame{}, false
	}
	data := strings.TrimSuffix(p.dataBuf.String(), "\n")
	typ := p.typeBuf
	if typ == "" {
		typ = "message"
	}
	p.dataBuf.Reset()
	p.typeBuf = ""
	return frame{id: p.lastID, typ: typ, data: data}, true
}

// digits parses a field value made only of ASCII digits.
func digits(v []byte) (int64, bool) {
	if len(v) == 0 || len(v) > 12 {
		return 0, false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	return n, err == nil
}
