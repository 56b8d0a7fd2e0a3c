package clip_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/das-ask/ask/internal/clip"
)

func TestBytes(t *testing.T) {
	for _, tc := range []struct {
		s     string
		limit int
		want  string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"a longer sentence", 10, "a longe…"},
		{"ééééé", 8, "éé…"}, // é is two bytes: the cut does not split one
		{"abcdef", 2, "…"},
	} {
		got := clip.Bytes(tc.s, tc.limit)
		if got != tc.want || !utf8.ValidString(got) {
			t.Errorf("Bytes(%q, %d) = %q, want %q", tc.s, tc.limit, got, tc.want)
		}
		if len(tc.s) > tc.limit && tc.limit >= len(clip.Ellipsis) && len(got) > tc.limit {
			t.Errorf("Bytes(%q, %d) is %d bytes", tc.s, tc.limit, len(got))
		}
	}
	long := strings.Repeat("日本", 1000)
	if got := clip.Bytes(long, 100); len(got) > 100 || !strings.HasPrefix(long, strings.TrimSuffix(got, clip.Ellipsis)) {
		t.Errorf("a long text cut to %d bytes: %q", len(got), got)
	}
}
