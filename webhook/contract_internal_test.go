package webhook

import (
	"fmt"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// TestContractSaysWhatEachAnswerDoes holds the contract's runEnded callback to classify: each
// of its responses says (x-delivery) whether that answer delivers, ends delivery as failed or
// is retried, and every status a receiver may answer is judged as the contract says. Found by
// an audit: the contract still said a 4xx other than 408 and 429 ended delivery as failed after
// the service had come to retry it, as Standard Webhooks has it (only a 410 says stop).
func TestContractSaysWhatEachAnswerDoes(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromFile("../openapi/ask.openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	op := doc.Paths.Find("/v1/conversations/{conversation_id}/asks").Post
	cb := op.Callbacks["runEnded"]
	if cb == nil || cb.Value == nil || cb.Value.Value("{$request.body#/webhook/url}") == nil {
		t.Fatal("createAsk has no runEnded callback")
	}
	responses := cb.Value.Value("{$request.body#/webhook/url}").Post.Responses
	word := map[string]string{outDelivered: "delivered", outRejected: "failed", outRetry: "retried"}
	for status := 200; status < 600; status++ {
		key := fmt.Sprint(status)
		r := responses.Value(key)
		if r == nil {
			key = fmt.Sprintf("%dXX", status/100)
			r = responses.Value(key)
		}
		if r == nil {
			key, r = "default", responses.Default()
		}
		if r == nil || r.Value == nil {
			t.Fatalf("the contract says nothing of a %d", status)
		}
		said, _ := r.Value.Extensions["x-delivery"].(string)
		if got := word[classify(Result{Status: status})]; said != got {
			t.Errorf("a %d: the contract's %s response says %q, the service's delivery is %q", status, key, said, got)
		}
	}
}
