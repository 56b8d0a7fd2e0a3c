package client

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// FuzzSSEParser feeds arbitrary bytes to the event-stream parser. Promises for every input: no
// panic; it ends (EOF or an error) after a bounded number of frames; no frame's data or id
// exceeds the size bound; every frame has a type; and the frames are the
// same whether the bytes arrive at once or one at a time (the parser never depends on how the
// network splits the stream).
func FuzzSSEParser(f *testing.F) {
	for _, s := range []string{
		"id: 1\nevent: accepted\ndata: {\"seq\":1}\n\n",
		": ask events\nretry: 2000\n\n: keepalive\n\nid: 2\nevent: step\ndata: {}\n\n",
		"\xef\xbb\xbfdata: bom\r\n\r\n",
		"data: a\rdata: b\r\rdata:c\n\n",
		"id: 3\x00\ndata: nul id ignored\n\n",
		"data\n\ndata:\n\nevent:\n\n",
		"retry: 99999999999999999999\nretry: -1\nretry: 1a\n\n",
		"data: partial event without a blank line",
		"id\nid:\nid: x\n\ndata: y\n\n",
		strings.Repeat("data: x\n", 100) + "\n",
	} {
		f.Add([]byte(s), 64)
	}
	f.Fuzz(func(t *testing.T, in []byte, max int) {
		if max <= 0 || max > 1<<16 {
			max = 64
		}
		whole, wholeErr := parseAll(t, bytes.NewReader(in), max, len(in))
		byByte, byteErr := parseAll(t, iotest.OneByteReader(bytes.NewReader(in)), max, len(in))
		if (wholeErr == nil) != (byteErr == nil) {
			t.Fatalf("read at once: %v; one byte at a time: %v", wholeErr, byteErr)
		}
		if len(whole) != len(byByte) {
			t.Fatalf("read at once: %d frames; one byte at a time: %d", len(whole), len(byByte))
		}
		for i := range whole {
			if whole[i] != byByte[i] {
				t.Fatalf("frame %d: at once %+v, one byte at a time %+v", i, whole[i], byByte[i])
			}
		}
	})
}

// parseAll reads frames until the end, checking each; an error other than EOF is returned.
func parseAll(t *testing.T, r io.Reader, max, inputLen int) ([]frame, error) {
	t.Helper()
	p := newSSEParser(r, "", max)
	var out []frame
	for {
		fr, err := p.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			if !errors.Is(err, errFrameTooLarge) {
				t.Fatalf("unexpected error %v", err)
			}
			return out, err
		}
		if len(fr.data) > max || len(fr.id) > max {
			t.Fatalf("frame of %d data bytes, id %d bytes, over the bound %d", len(fr.data), len(fr.id), max)
		}
		if fr.typ == "" {
			t.Fatalf("frame without a type")
		}
		out = append(out, fr)
		// Every dispatched frame consumed at least a "data" line and a blank line.
		if len(out) > inputLen/2+1 {
			t.Fatalf("%d frames from %d bytes", len(out), inputLen)
		}
	}
}
