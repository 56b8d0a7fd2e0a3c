package obs

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestDashboardUsesOnlyOurMetrics keeps deploy/grafana/ask.json and docs/operations.md in step
// with the metrics: every ask_* name they mention is one the service registers, and every
// metric the service registers is documented.
func TestDashboardUsesOnlyOurMetrics(t *testing.T) {
	registered := map[string]bool{}
	for _, c := range append(NewMetrics().own(), newWebhookMetrics().collectors()...) {
		ch := make(chan *prometheus.Desc, 4)
		c.Describe(ch)
		close(ch)
		for d := range ch {
			name := regexp.MustCompile(`fqName: "([^"]+)"`).FindStringSubmatch(d.String())
			if name == nil {
				t.Fatalf("unreadable descriptor %s", d)
			}
			registered[name[1]] = true
		}
	}
	if len(registered) < 20 {
		t.Fatalf("found %d metrics by reflection, want all 20", len(registered))
	}
	mentioned := regexp.MustCompile(`\bask_[a-z_]+`)
	for _, file := range []string{"../deploy/grafana/ask.json", "../docs/operations.md"} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, name := range mentioned.FindAllString(string(b), -1) {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base, ok := strings.CutSuffix(name, suffix); ok && registered[base] {
					name = base
				}
			}
			seen[name] = true
			if !registered[name] {
				t.Errorf("%s mentions %s, which the service does not register", file, name)
			}
		}
		if strings.HasSuffix(file, ".md") {
			for name := range registered {
				if !seen[name] {
					t.Errorf("%s does not document %s", file, name)
				}
			}
		}
	}
}
