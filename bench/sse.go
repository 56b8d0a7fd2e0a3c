package bench

import (
	"bufio"
	"bytes"
	"io"
)

// frame is one dispatched Server-Sent Event. Its slices are only valid during the callback
// that receives it.
type frame struct {
	ID, Event, Data []byte
}

// sseCounter reads an event stream as cheaply as possible, the same way for every server under
// test: lines, no JSON decoding. It handles the subset every server here writes (LF line ends,
// one data line per event).
type sseCounter struct {
	r *bufio.Reader
	// Frames and Bytes count dispatched events and the bytes read, comments included.
	Frames int
	Bytes  int64
	// Comments counts comment lines (keep-alives and opening comments).
	Comments int

	id, event, data []byte
	hasData         bool
}

func newSSECounter(r io.Reader) *sseCounter {
	return &sseCounter{r: bufio.NewReaderSize(r, 64<<10)}
}

const (
	prefixID    = "id:"
	prefixEvent = "event:"
	prefixData  = "data:"
)

// next reads up to and including the next dispatched event or comment line. It returns the
// event (ok true), or ok false for a comment; io.EOF at the end of the stream.
func (s *sseCounter) next() (f frame, ok bool, err error) {
	for {
		line, err := s.r.ReadSlice('\n')
		s.Bytes += int64(len(line))
		if err != nil {
			if err == bufio.ErrBufferFull {
				// A line longer than the buffer: keep its prefix only (frames here are small).
				for err == bufio.ErrBufferFull {
					var more []byte
					more, err = s.r.ReadSlice('\n')
					s.Bytes += int64(len(more))
				}
				if err != nil {
					return frame{}, false, err
				}
				continue
			}
			return frame{}, false, err
		}
		line = line[:len(line)-1]
		switch {
		case len(line) == 0:
			if !s.hasData {
				s.id, s.event = s.id[:0], s.event[:0]
				continue
			}
			s.Frames++
			f = frame{ID: s.id, Event: s.event, Data: s.data}
			s.hasData = false
			s.id, s.event, s.data = s.id[:0], s.event[:0], s.data[:0]
			return f, true, nil
		case line[0] == ':':
			s.Comments++
			return frame{}, false, nil
		case bytes.HasPrefix(line, []byte(prefixID)):
			s.id = append(s.id[:0], trimSpace1(line[len(prefixID):])...)
		case bytes.HasPrefix(line, []byte(prefixEvent)):
			s.event = append(s.event[:0], trimSpace1(line[len(prefixEvent):])...)
		case bytes.HasPrefix(line, []byte(prefixData)):
			s.data = append(s.data[:0], trimSpace1(line[len(prefixData):])...)
			s.hasData = true
		}
	}
}

// until reads events until stop reports true for one (returning nil), or the stream ends
// (io.ErrUnexpectedEOF) or fails.
func (s *sseCounter) until(stop func(frame) bool) error {
	for {
		f, ok, err := s.next()
		if err != nil {
			if err == io.EOF {
				return io.ErrUnexpectedEOF
			}
			return err
		}
		if ok && stop(f) {
			return nil
		}
	}
}

// untilComment reads until the first comment line: the opening comment of our streams and of
// the bare writer, which says the stream is established.
func (s *sseCounter) untilComment() error {
	for {
		_, ok, err := s.next()
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
	}
}

func trimSpace1(b []byte) []byte {
	if len(b) > 0 && b[0] == ' ' {
		return b[1:]
	}
	return b
}

// isDone stops at our streams' last event.
func isDone(f frame) bool { return string(f.Event) == "done" }

const (
	rpcResult = `"result":`
	rpcMethod = `"method":`
)

// isRPCResult stops at an MCP stream's last message: the JSON-RPC response.
func isRPCResult(f frame) bool {
	return bytes.Contains(f.Data, []byte(rpcResult)) && !bytes.Contains(f.Data, []byte(rpcMethod))
}
