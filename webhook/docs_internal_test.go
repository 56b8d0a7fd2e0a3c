package webhook

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fenced returns the body of the first ``` block of lang in doc.
func fenced(t *testing.T, doc, lang string) string {
	t.Helper()
	m := regexp.MustCompile("(?s)```" + lang + "\n(.*?)```").FindStringSubmatch(doc)
	if m == nil {
		t.Fatalf("docs/webhooks.md has no ```%s block", lang)
	}
	return m[1]
}

// TestDocsVerificationIsTrue holds docs/webhooks.md's "Signing" section to the service: the test
// vector it gives is what the sender signs, and its Python verify function accepts the vector,
// also as one entry among a rotation's, and refuses a changed body and a stale timestamp.
func TestDocsVerificationIsTrue(t *testing.T) {
	b, err := os.ReadFile("../docs/webhooks.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	vec := map[string]string{}
	for _, line := range strings.Split(fenced(t, doc, "text"), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			vec[k] = strings.TrimSpace(v)
		}
	}
	ts, err := strconv.ParseInt(vec["webhook-timestamp"], 10, 64)
	if err != nil {
		t.Fatalf("the vector's timestamp: %v", err)
	}
	s, err := newSender(Config{Secrets: []string{vec["secret"]}}.withDefaults(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.sign("https://hooks.example/a", vec["webhook-id"], time.Unix(ts, 0), []byte(vec["body"])); err != nil || got != vec["webhook-signature"] {
		t.Fatalf("the service signs the documented vector %q (%v), the page says %q", got, err, vec["webhook-signature"])
	}

	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed (apt-get install python3): the page's Python verify function is not run")
	}
	script := fenced(t, doc, "python") + `
import sys
secret, msg_id, ts, body, sig = sys.argv[1:6]
h = {"webhook-id": msg_id, "webhook-timestamp": ts, "webhook-signature": sig}
rotated = dict(h, **{"webhook-signature": "v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4= " + sig})
print(verify([secret], h, body.encode(), now=int(ts) + 60),
      verify(["whsec_" + "A" * 32, secret], rotated, body.encode(), now=int(ts)),
      verify([secret], h, body.encode() + b" ", now=int(ts)),
      verify([secret], h, body.encode(), now=int(ts) + 600))
`
	out, err := exec.CommandContext(t.Context(), py, "-c", script,
		vec["secret"], vec["webhook-id"], vec["webhook-timestamp"], vec["body"], vec["webhook-signature"]).CombinedOutput()
	if err != nil {
		t.Fatalf("the page's Python: %v\n%s", err, out)
	}
	if got, want := strings.TrimSpace(string(out)), "True True False False"; got != want {
		t.Fatalf("the page's verify on the vector, rotated, a changed body, a stale timestamp: %s, want %s", got, want)
	}
}
