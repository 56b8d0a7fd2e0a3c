package egress_test

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/das-ask/ask/internal/egress"
)

func TestLimitBody(t *testing.T) {
	for _, c := range []struct {
		name    string
		body    string
		limit   int64
		tooLong bool
	}{
		{"shorter", "abc", 4, false},
		{"exactly the limit", "abcd", 4, false},
		{"one byte more", "abcde", 4, true},
		{"much more", strings.Repeat("x", 1<<16), 100, true},
		{"empty at a zero limit", "", 0, false},
		{"a byte at a zero limit", "x", 0, true},
	} {
		for _, reader := range []struct {
			name string
			wrap func(io.Reader) io.Reader
		}{
			{"whole", func(r io.Reader) io.Reader { return r }},
			{"a byte at a time", iotest.OneByteReader},
			{"data with EOF", iotest.DataErrReader},
		} {
			t.Run(c.name+"/"+reader.name, func(t *testing.T) {
				var refused []error
				body := egress.LimitBody(io.NopCloser(reader.wrap(strings.NewReader(c.body))), c.limit,
					func(err error) error { refused = append(refused, err); return err })
				got, err := io.ReadAll(body)
				if c.tooLong {
					if !errors.Is(err, egress.ErrResponseTooLarge) {
						t.Fatalf("read %d of %d bytes, err %v; want ErrResponseTooLarge", len(got), len(c.body), err)
					}
					if int64(len(got)) > c.limit {
						t.Errorf("read %d bytes past a limit of %d", len(got), c.limit)
					}
					if len(refused) != 1 || !errors.Is(refused[0], egress.ErrResponseTooLarge) {
						t.Errorf("refuse was given %v; want ErrResponseTooLarge once", refused)
					}
					return
				}
				if err != nil || string(got) != c.body {
					t.Fatalf("read %q, %v; want the body whole", got, err)
				}
				if len(refused) != 0 {
					t.Errorf("refuse was called with %v for a body within the limit", refused)
				}
			})
		}
	}
}

// Without a refuse hook the bound still holds.
func TestLimitBodyWithoutRefuse(t *testing.T) {
	_, err := io.ReadAll(egress.LimitBody(io.NopCloser(strings.NewReader("abcde")), 4, nil))
	if !errors.Is(err, egress.ErrResponseTooLarge) {
		t.Fatalf("err %v; want ErrResponseTooLarge", err)
	}
}
