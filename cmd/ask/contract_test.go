package main

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"

	askconfig "github.com/das-ask/ask/config"
)

// An outcome that breaks the contract is said as the failure it is, exit 1, naming its type, seq
// and field, without advice to follow again (which reads the same event): an answer without text
// printed an empty answer and exited 0, an error without kind "The run failed (): m" and exited 4,
// and a decode error advised "(ask --follow tk tries again)".
func TestOutcomeThatBreaksTheContract(t *testing.T) {
	for _, tc := range []struct {
		name, outcome, want string
	}{
		{"an answer without text", frameOf(2, "answer", `,"caveats":[],"path":{"speed":"full","detail":"warehouse"},"provenance":[],"sql":[]`),
			"answer event 2 is not the contract's: the field text is missing"},
		{"an error without kind", frameOf(2, "error", `,"message":"m"`),
			"error event 2 is not the contract's: the field kind is missing"},
		{"an answer that is not JSON", "id: 2\nevent: answer\ndata: {\n\n", "answer event 2 is not JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				svc := newFakeService()
				env := askconfig.MapEnv(map[string]string{"ASK_URL": "http://ask.test/ask", "XDG_STATE_HOME": t.TempDir()})
				var stdout, stderr bytes.Buffer
				svc.Send(fAccepted, tc.outcome, frameOf(3, "done", `,"outcome":"answer","steps":0,"model_calls":1,"input_tokens":1,"output_tokens":1,"elapsed_ms":1`))
				code := runWith(t.Context(), []string{"--token", "t", "q"}, nil, &stdout, &stderr, env, &http.Client{Transport: svc})
				errs := stderr.String()
				if code != exitFailure || stdout.String() != "" || !strings.Contains(errs, tc.want) {
					t.Errorf("exit %d, stdout %q, stderr %q; want 1, nothing on stdout, and %q", code, stdout.String(), errs, tc.want)
				}
				if strings.Contains(errs, "tries again") {
					t.Errorf("stderr %q advises following again, which reads the same event", errs)
				}
			})
		})
	}
}
