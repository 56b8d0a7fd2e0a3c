package eval_test

import (
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/das-ask/ask/eval"
)

// hangingTransport is an identity provider that takes the request and never answers.
type hangingTransport struct{}

func (hangingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	<-req.Context().Done()
	return nil, req.Context().Err()
}

// A dev IdP that does not answer is said within the mint timeout, naming the IdP, not waited
// on for ever (with --idp at a frozen IdP, ask-eval hung until it was killed).
func TestIdPTokensTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tokens := &eval.IdPTokens{URL: "http://idp.test", HTTPClient: &http.Client{Transport: hangingTransport{}}}
		start := time.Now()
		_, err := tokens.Token(t.Context(), "alice")
		if waited := time.Since(start); waited != eval.DefaultMintTimeout {
			t.Errorf("gave up after %v, want %v", waited, eval.DefaultMintTimeout)
		}
		if err == nil || !strings.Contains(err.Error(), "the dev identity provider at http://idp.test did not answer within 10s") {
			t.Errorf("got %v, want it to say the IdP did not answer", err)
		}
	})
}
