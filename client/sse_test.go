package client

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func TestSSEParserWHATWG(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		want  []frame
		retry time.Duration
	}{
		{"one frame", "id: 1\nevent: step\ndata: {}\n\n", []frame{{id: "1", typ: "step", data: "{}"}}, 0},
		{"multi-line data joined with LF", "data: a\ndata: b\ndata:\n\n", []frame{{typ: "message", data: "a\nb\n"}}, 0},
		{"CRLF line ends", "id: 7\r\nevent: x\r\ndata: y\r\n\r\n", []frame{{id: "7", typ: "x", data: "y"}}, 0},
		{"CR line ends", "id: 7\revent: x\rdata: y\r\r", []frame{{id: "7", typ: "x", data: "y"}}, 0},
		{"comments ignored", ": keepalive\n:\ndata: z\n: more\n\n", []frame{{typ: "message", data: "z"}}, 0},
		{"only one leading space stripped", "data:  two\n\n", []frame{{typ: "message", data: " two"}}, 0},
		{"no space after colon", "data:x\n\n", []frame{{typ: "message", data: "x"}}, 0},
		{"field without colon has empty value", "data\ndata\n\n", []frame{{typ: "message", data: "\n"}}, 0},
		{"unknown field ignored", "foo: bar\ndata: d\n\n", []frame{{typ: "message", data: "d"}}, 0},
		{"empty data is not dispatched", "event: x\n\ndata: d\n\n", []frame{{typ: "message", data: "d"}}, 0},
		{"id persists across frames", "id: 3\ndata: a\n\ndata: b\n\n", []frame{{id: "3", typ: "message", data: "a"}, {id: "3", typ: "message", data: "b"}}, 0},
		{"empty id resets", "id: 3\ndata: a\n\nid\ndata: b\n\n", []frame{{id: "3", typ: "message", data: "a"}, {id: "", typ: "message", data: "b"}}, 0},
		{"id with NUL ignored", "id: 3\ndata: a\n\nid: 4\x005\ndata: b\n\n", []frame{{id: "3", typ: "message", data: "a"}, {id: "3", typ: "message", data: "b"}}, 0},
		{"id on a data-less event still moves the cursor", "id: 9\n\ndata: a\n\n", []frame{{id: "9", typ: "message", data: "a"}}, 0},
		{"retry digits", "retry: 2500\ndata: a\n\n", []frame{{typ: "message", data: "a"}}, 2500 * time.Millisecond},
		{"retry non-digits ignored", "retry: 25s\ndata: a\n\n", []frame{{typ: "message", data: "a"}}, 0},
		{"leading BOM dropped", "\xEF\xBB\xBFdata: a\n\n", []frame{{typ: "message", data: "a"}}, 0},
		{"partial event at EOF discarded", "data: a\n\ndata: b\n", []frame{{typ: "message", data: "a"}}, 0},
		{"event type reset after dispatch", "event: x\ndata: a\n\ndata: b\n\n", []frame{{typ: "x", data: "a"}, {typ: "message", data: "b"}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newSSEParser(strings.NewReader(tt.in), "", 0)
			var got []frame
			for {
				f, err := p.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("Next: %v", err)
				}
				got = append(got, f)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d frames %+v, want %d %+v", len(got), got, len(tt.want), tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("frame %d: got %+v, want %+v", i, got[i], tt.want[i])
				}
			}
			if d, _ := p.Retry(); d != tt.retry {
				t.Errorf("retry: got %v, want %v", d, tt.retry)
			}
		})
	}
}

// A frame is returned as soon as its blank line arrives, without waiting for more input, even
// when that blank line is a lone CR that might be followed by LF.
func TestSSEParserIncremental(t *testing.T) {
	pr, pw := io.Pipe()
	p := newSSEParser(pr, "", 0)
	go func() { _, _ = io.WriteString(pw, "id: 1\r\ndata: a\r\r") }()
	f, err := p.Next()
	if err != nil || f.data != "a" || f.id != "1" {
		t.Fatalf("got %+v, %v; want data a, id 1", f, err)
	}
	go func() { _, _ = io.WriteString(pw, "\ndata: b\n\n"); _ = pw.Close() }()
	f, err = p.Next()
	if err != nil || f.data != "b" {
		t.Fatalf("got %+v, %v; want data b (the LF after CR belongs to the earlier line)", f, err)
	}
}

func TestSSEParserCarriesLastID(t *testing.T) {
	p := newSSEParser(strings.NewReader("data: a\n\n"), "41", 0)
	f, err := p.Next()
	if err != nil || f.id != "41" {
		t.Fatalf("got %+v, %v; want the carried-over id 41", f, err)
	}
}

func TestSSEParserBound(t *testing.T) {
	p := newSSEParser(strings.NewReader("data: "+strings.Repeat("x", 100)+"\n\n"), "", 64)
	if _, err := p.Next(); !errors.Is(err, errFrameTooLarge) {
		t.Fatalf("got %v, want errFrameTooLarge", err)
	}
	p = newSSEParser(strings.NewReader(strings.Repeat("data: 0123456789\n", 10)+"\n"), "", 64)
	if _, err := p.Next(); !errors.Is(err, errFrameTooLarge) {
		t.Fatalf("got %v, want errFrameTooLarge for accumulated data", err)
	}
}

// The bound is on an event's data (its lines joined by '\n'), as the Python and TypeScript
// clients count it: data of exactly the bound is read, one byte more is refused. Data of two
// lines, so no line reaches the bound on its own.
func TestSSEParserBoundIsOnTheData(t *testing.T) {
	const max = 64
	for _, tt := range []struct {
		name  string
		first string
		want  error
	}{
		{"at the bound", strings.Repeat("a", 31), nil},
		{"a byte over", strings.Repeat("a", 32), errFrameTooLarge},
	} {
		t.Run(tt.name, func(t *testing.T) {
			second := strings.Repeat("b", 32)
			p := newSSEParser(strings.NewReader("data:"+tt.first+"\ndata:"+second+"\n\n"), "", max)
			f, err := p.Next()
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			if err == nil && f.data != tt.first+"\n"+second {
				t.Fatalf("got %d bytes of data, want %d", len(f.data), max)
			}
		})
	}
}

// The service sends each event's data on one line, after "data: ": data of the bound on one
// line is read (the line was bounded as a whole, six bytes short), a byte more is not.
func TestSSEParserBoundOnOneLine(t *testing.T) {
	const max = 64
	for _, prefix := range []string{"data:", "data: "} {
		for _, n := range []int{max, max + 1} {
			p := newSSEParser(strings.NewReader(prefix+strings.Repeat("a", n)+"\n\n"), "", max)
			f, err := p.Next()
			if n <= max && (err != nil || len(f.data) != n) {
				t.Errorf("%q and %d bytes: %v, %d bytes read; want all", prefix, n, err, len(f.data))
			}
			if n > max && !errors.Is(err, errFrameTooLarge) {
				t.Errorf("%q and %d bytes: %v, want errFrameTooLarge", prefix, n, err)
			}
		}
	}
}
