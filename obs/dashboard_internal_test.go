package obs

import (
	"encoding/json"
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

// TestDashboardLabelsExist checks the queries of deploy/grafana/ask.json and of
// docs/operations.md's example alerts against the labels the service gives each metric: a
// matcher on a label the metric does not have selects nothing, and a grouping by one draws one
// unlabelled line, and neither says so.
func TestDashboardLabelsExist(t *testing.T) {
	labels := map[string]map[string]bool{}
	for _, c := range append(NewMetrics().own(), newWebhookMetrics().collectors()...) {
		ch := make(chan *prometheus.Desc, 4)
		c.Describe(ch)
		close(ch)
		for d := range ch {
			m := regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}`).FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("unreadable descriptor %s", d)
			}
			labels[m[1]] = map[string]bool{}
			for _, l := range strings.Split(m[2], ",") {
				if l != "" {
					labels[m[1]][l] = true
				}
			}
		}
	}

	var exprs []string
	b, err := os.ReadFile("../deploy/grafana/ask.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	b, err = os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if strings.HasPrefix(line, "    ") && strings.Contains(line, "ask_") && !strings.HasPrefix(strings.TrimSpace(line), "#") {
			exprs = append(exprs, strings.TrimSpace(line))
		}
	}
	if len(exprs) < 20 {
		t.Fatalf("found %d queries, want the dashboard's and the example alerts", len(exprs))
	}

	selector := regexp.MustCompile(`\b(ask_[a-z_]+)(?:\{([^}]*)\})?`)
	matcher := regexp.MustCompile(`([a-zA-Z_]+)\s*(?:=~|!~|!=|=)`)
	grouping := regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
	for _, e := range exprs {
		has := map[string]bool{"instance": true, "job": true} // Prometheus's own target labels
		for _, s := range selector.FindAllStringSubmatch(e, -1) {
			name, histogram := s[1], false
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base, ok := strings.CutSuffix(name, suffix); ok && labels[base] != nil {
					name, histogram = base, suffix == "_bucket"
				}
			}
			own, ok := labels[name]
			if !ok {
				t.Errorf("%s: %s is not a metric of the service", e, s[1])
				continue
			}
			for l := range own {
				has[l] = true
			}
			has["le"] = has["le"] || histogram
			for _, m := range matcher.FindAllStringSubmatch(s[2], -1) {
				if !own[m[1]] {
					t.Errorf("%s: %s has no label %s", e, s[1], m[1])
				}
			}
		}
		for _, g := range grouping.FindAllStringSubmatch(e, -1) {
			for _, l := range strings.Split(g[1], ",") {
				if l = strings.TrimSpace(l); !has[l] {
					t.Errorf("%s: grouped by %s, a label none of its metrics has", e, l)
				}
			}
		}
	}
}
