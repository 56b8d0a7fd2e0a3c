package conformance

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"time"
)

// frame is one Server-Sent Events frame exactly as it arrived: the fields the suite checks are
// kept apart rather than interpreted, because the wire form is what is under test.
type frame struct {
	// At is when the frame's last line arrived.
	At time.Time
	// Comment is set for a comment line (": keepalive"); such a frame has no other field.
	Comment bool
	// Text is a comment's text, after the colon.
	Text string
	// IDOnly is set for a frame that set an id but carried no data: not an event, yet a
	// browser's EventSource takes its id as the last event id, and resumes after it.
	IDOnly    bool
	ID        string
	HasID     bool
	Event     string
	DataLines []string
}

// event is one event frame with its data decoded.
type event struct {
	frame
	// Raw is the data as sent.
	Raw []byte
	// Obj is the data decoded as a JSON object; nil when it is not one.
	Obj  map[string]any
	Seq  int64
	Type string
}

// str returns a string field of the event's data, or "".
func (e event) str(key string) string {
	s, _ := e.Obj[key].(string)
	return s
}

// num returns a numeric field of the event's data, or -1.
func (e event) num(key string) int64 {
	f, ok := e.Obj[key].(float64)
	if !ok {
		return -1
	}
	return int64(f)
}

// maxLine bounds one line of the stream; a longer one is a failure of the target.
const maxLine = 4 << 20

// errLineTooLong is returned when a line of the stream exceeds maxLine.
var errLineTooLong = errors.New("an event stream line exceeds 4 MiB")

// sseReader splits a stream into frames. Lines end in LF, CRLF or CR. Not safe for concurrent use.
type sseReader struct {
	r   *bufio.Reader
	now func() time.Time
	cur frame
	has bool
	// retries are the values of every retry field read so far, in order.
	retries []string
}

func newSSEReader(r io.Reader, now func() time.Time) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, 64<<10), now: now}
}

// next returns the next comment or dispatched frame, or the read error (io.EOF at the end; a
// partial frame at the end is dropped, as a browser would). Fields other than id, event and
// data (unknown ones) are ignored; retry values are kept apart (retries).
func (s *sseReader) next() (frame, error) {
	for {
		line, err := s.line()
		if err != nil {
			return frame{}, err
		}
		at := s.now()
		switch {
		case line == "":
			// A frame without data is not dispatched (WHATWG): "retry:" alone, for one. One
			// with an id is returned all the same, marked: the id it sets is the last event id.
			f, dispatch := s.cur, s.has && len(s.cur.DataLines) > 0
			s.cur, s.has = frame{}, false
			if dispatch {
				f.At = at
				return f, nil
			}
			if f.HasID {
				f.At, f.IDOnly = at, true
				return f, nil
			}
		case strings.HasPrefix(line, ":"):
			return frame{At: at, Comment: true, Text: strings.TrimPrefix(line, ":")}, nil
		default:
			name, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			s.has = true
			switch name {
			case "id":
				s.cur.ID, s.cur.HasID = value, true
			case "event":
				s.cur.Event = value
			case "data":
				s.cur.DataLines = append(s.cur.DataLines, value)
			case "retry":
				s.retries = append(s.retries, value)
			}
		}
	}
}

func (s *sseReader) line() (string, error) {
	var b bytes.Buffer
	for {
		c, err := s.r.ReadByte()
		if err != nil {
			return "", err
		}
		switch c {
		case '\n':
			return b.String(), nil
		case '\r':
			if n, err := s.r.Peek(1); err == nil && n[0] == '\n' {
				_, _ = s.r.ReadByte()
			}
			return b.String(), nil
		}
		if b.Len() >= maxLine {
			return "", errLineTooLong
		}
		b.WriteByte(c)
	}
}

// decodeEvent decodes a frame's data; the event's Seq is -1 and Obj nil when it does not decode.
func decodeEvent(f frame) event {
	e := event{frame: f, Seq: -1}
	e.Raw = []byte(strings.Join(f.DataLines, "\n"))
	if err := json.Unmarshal(e.Raw, &e.Obj); err != nil {
		e.Obj = nil
		return e
	}
	e.Seq = e.num("seq")
	e.Type = e.str("type")
	return e
}

// idSeq parses a frame's id as a seq, or returns -1.
func idSeq(f frame) int64 {
	n, err := strconv.ParseInt(f.ID, 10, 64)
	if err != nil || !f.HasID {
		return -1
	}
	return n
}
