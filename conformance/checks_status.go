package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"
)

func checkStatus(ctx context.Context, s *session) verdict {
	runs, err := s.allRuns(ctx)
	if err != nil {
		return broken(err)
	}
	var found []string
	for _, r := range runs {
		if r.status == nil {
			found = append(found, fmt.Sprintf("%s: status answered %d", r.label, r.statusCode))
			continue
		}
		t, okT := r.final.terminal()
		d, okD := r.final.done()
		if !okT || !okD {
			found = append(found, r.label+": the stream has no terminal event and done to compare")
			continue
		}
		st := r.status
		if string(st.State) != t.Type {
			found = append(found, fmt.Sprintf("%s: state %s, stream ended in %s", r.label, st.State, t.Type))
		}
		if st.LastSeq != d.Seq {
			found = append(found, fmt.Sprintf("%s: last_seq %d, done is %d", r.label, st.LastSeq, d.Seq))
		}
		if st.Ticket != r.ticket.Ticket || st.ConversationId != r.conv {
			found = append(found, r.label+": status names another ticket or conversation")
		}
		if st.Terminal == nil {
			found = append(found, r.label+": no terminal in the status")
		} else if b, err := json.Marshal(st.Terminal); err == nil {
			var m map[string]any
			_ = json.Unmarshal(b, &m)
			if m["type"] != t.Type || int64(asFloat(m["seq"])) != t.Seq {
				found = append(found, fmt.Sprintf("%s: status terminal %v:%v, stream %d:%s", r.label, m["seq"], m["type"], t.Seq, t.Type))
			}
		}
		if st.Done == nil || st.Done.Seq != d.Seq || st.Done.Steps != d.num("steps") {
			found = append(found, r.label+": status done differs from the stream's done")
		}
		// Not only their seq and type: the status's terminal and done are the stream's events,
		// every member (a status assembled apart from the log may hold a stale or partial one).
		var raw struct {
			Terminal, Done map[string]any
		}
		if json.Unmarshal(r.statusBody, &raw) == nil {
			for _, x := range []struct {
				what   string
				status map[string]any
				stream event
			}{{"terminal", raw.Terminal, t}, {"done", raw.Done, d}} {
				if x.status != nil && !reflect.DeepEqual(x.status, x.stream.Obj) {
					found = append(found, fmt.Sprintf("%s: the status's %s differs from the stream's %s %d in %s", r.label, x.what, x.stream.Type, x.stream.Seq, strings.Join(differingKeys(x.status, x.stream.Obj), ", ")))
				}
			}
		}
	}
	if sr, err := s.slowRunFixture(ctx); err == nil {
		switch {
		case sr.runningCode != http.StatusOK || sr.running == nil:
			found = append(found, fmt.Sprintf("slow: status while running answered %d", sr.runningCode))
		case sr.running.State != "running" || sr.running.Terminal != nil:
			found = append(found, fmt.Sprintf("slow: status while running says %s", sr.running.State))
		}
	}
	return problems("the status to agree with the stream: state, last_seq, terminal and done", found,
		fmt.Sprintf("%d runs: status state, last_seq, terminal and done agree with the stream; running while running", len(runs)))
}

func asFloat(v any) float64 {
	f, _ := v.(float64)
	return f
}

func checkPreferWait(ctx context.Context, s *session) verdict {
	sr, err := s.slowRunFixture(ctx)
	if err != nil {
		return broken(err)
	}
	switch {
	case sr.waited == nil:
		return fail("200 with the status for Prefer: wait=1", fmt.Sprintf("%d", sr.waitedCode))
	case !strings.Contains(strings.ToLower(sr.waitedApplied), "wait=1"):
		return fail("Preference-Applied: wait=1", fmt.Sprintf("%q after %s", sr.waitedApplied, sr.waitedFor.Round(time.Millisecond)))
	case sr.waited.State == "running" && sr.waitedFor < 900*time.Millisecond:
		return fail("a running ask's status after waiting about 1 s", fmt.Sprintf("after %s", sr.waitedFor.Round(time.Millisecond)))
	}
	return pass("Prefer: wait=1 during the run answered %s after %s, Preference-Applied: %s", sr.waited.State, sr.waitedFor.Round(10*time.Millisecond), sr.waitedApplied)
}

// differingKeys names the top-level members whose values differ between a and b.
func differingKeys(a, b map[string]any) []string {
	var out []string
	for k, v := range a {
		if w, ok := b[k]; !ok || !reflect.DeepEqual(v, w) {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
