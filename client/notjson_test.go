package client_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/das-ask/ask/client"
)

// An event whose data is not JSON ends the stream with an error naming the frame, never its data:
// an accepted event's data holds the question. The error wrapped the JSON decoder's, which quotes
// the first character it could not read ("invalid character 'H' …"): the question's.
func TestNotJSONEventErrorHoldsNoneOfItsData(t *testing.T) {
	c := memClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		_, _ = io.WriteString(w, "id: 1\nevent: accepted\ndata: How many sev1 incidents did we have?\n\n")
	}), client.Options{})
	var last error
	for _, err := range c.Events(t.Context(), "tk", client.EventsOptions{}) {
		last = err
	}
	if last == nil || !strings.Contains(last.Error(), "event 1") {
		t.Fatalf("error %v: want one naming event 1", last)
	}
	if msg := last.Error(); strings.Contains(msg, "'H'") || strings.Contains(msg, "How") {
		t.Errorf("error %q holds the event's data", msg)
	}
}
