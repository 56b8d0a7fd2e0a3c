package conformance_test

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask/conformance"
	"github.com/das-ask/ask/demo/llmstub"
	"github.com/das-ask/ask/demo/stack"
)

// phase2Checks are the checks whose verdict depends on the phase, with those that read every
// run's stream: what a phase-2 target is held to beyond phase 1.
var phase2Checks = regexp.MustCompile(`^(run\..*|cancel\..*|events\..*|behaviour\.divergence|audit\..*|status\.agrees-with-stream|privacy\..*)$`)

// startPhase2 starts the two-source demo (a catalog and a warehouse) in phase 2, with the test
// stacks' timings, and returns the suite's configuration for base (its URL, or a proxy's).
func startPhase2(t *testing.T) (*stack.Stack, func(base string) conformance.Config) {
	t.Helper()
	yaml := bytes.Replace(llmstub.DefaultScriptYAML(), []byte("delay: 3s"), []byte("delay: "+testSlowWait.String()), 1)
	script, err := llmstub.ParseScript(yaml)
	if err != nil {
		t.Fatal(err)
	}
	s, err := stack.Start(t.Context(), stack.Options{Split: true, Phase: 2, KeepAlive: testKeepAlive, StubScript: script})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close the stack: %v", err)
		}
	})
	return s, func(base string) conformance.Config {
		return conformance.Config{
			BaseURL:    base,
			Tokens:     conformance.IdPTokens{URL: s.IdPURL},
			AuditURL:   s.SourceURLs[0],
			AuditURLs:  append([]string(nil), s.SourceURLs[1:]...),
			Phase2:     true,
			Sources:    []string{"catalog", "warehouse"},
			Behaviour:  true,
			KeepAlive:  testKeepAlive,
			SlowWait:   testSlowWait,
			RunTimeout: 20 * time.Second,
			Only:       phase2Checks,
		}
	}
}

func TestThePhase2ServiceConforms(t *testing.T) {
	s, config := startPhase2(t)
	rep, err := conformance.Run(t.Context(), config(s.AskURL))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	_ = rep.WriteText(&b)
	t.Log("\n" + b.String())
	if _, f, _ := rep.Counts(); f != 0 || len(rep.Results) == 0 {
		t.Errorf("got %s, want none failed", rep.Summary())
	}
}

// phase2Variants are broken phase-2 services: each names the checks that must fail against it.
func phase2Variants() []variant {
	return []variant{
		// A source branch's work reported in the other source's branch while both are open
		// (branches looked up by the wrong key): each names an open branch, the wrong one.
		{name: "p2-step-in-other-source-branch", fails: []string{"run.events-name-open-branches"},
			frame: func() func(*proxy, *streamState, sseFrame) []sseFrame {
				var bySource perStream[map[string]string]
				return func(_ *proxy, st *streamState, f sseFrame) []sseFrame {
					m := f.data()
					if m == nil {
						return []sseFrame{f}
					}
					b := bySource.of(st)
					if *b == nil {
						*b = map[string]string{}
					}
					switch {
					case m["type"] == "branch" && m["role"] == "source" && m["state"] == "open":
						(*b)[m["source"].(string)] = m["branch_id"].(string)
					case m["type"] == "branch" && m["role"] == "source":
						delete(*b, m["source"].(string)) // closed: only open branches are named
					case m["type"] == "step" || m["type"] == "milestone":
						for src, id := range *b {
							if src != m["source"] && m["branch_id"] == (*b)[m["source"].(string)] {
								m["branch_id"] = id
								return []sseFrame{eventFrame(m)}
							}
						}
					}
					return []sseFrame{f}
				}
			}()},
		// A branch whose parent is no branch of the run.
		{name: "p2-orphan-branch", fails: []string{"run.branch-per-source"},
			frame: editEvents("branch", func(_ *proxy, m map[string]any) {
				if m["role"] != "supervisor" {
					m["parent"] = "b99"
				}
			})},
		// Source branches never closed.
		{name: "p2-source-branch-left-open", fails: []string{"run.branch-per-source", "cancel.closes-every-branch"},
			frame: func(_ *proxy, _ *streamState, f sseFrame) []sseFrame {
				if m := f.data(); m != nil && m["type"] == "branch" && m["role"] == "source" && m["state"] == "close" {
					return nil
				}
				return []sseFrame{f}
			}},
		// Divergence dropped in phase 2.
		{name: "p2-divergence-null", fails: []string{"behaviour.divergence"},
			frame: editEvents("answer", func(_ *proxy, m map[string]any) { m["divergence"] = nil })},
		// Milestones without their branch.
		{name: "p2-milestone-unnamed", fails: []string{"run.events-name-open-branches"},
			frame: editEvents("milestone", func(_ *proxy, m map[string]any) { delete(m, "branch_id") })},
	}
}

func TestPhase2VariantsFail(t *testing.T) {
	s, config := startPhase2(t)
	for _, v := range phase2Variants() {
		t.Run(v.name, func(t *testing.T) {
			runVariant(t, config(startProxy(t, &testStack{main: s}, s.AskURL, v)), v)
		})
	}
}
