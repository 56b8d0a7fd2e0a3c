package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
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
