package server_test

import (
	"context"
	"fmt"
	"net/http/httptest"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
)

// ExampleNew builds the service around a runner, serves it, asks one question and reads the
// outcome with a long poll.
func ExampleNew() {
	runner := ask.RunnerFunc(func(ctx context.Context, req ask.Request, emit ask.Emitter) ask.Outcome {
		emit.Milestone(gen.MilestoneBody{Phase: gen.MilestonePhaseGrounding, Subject: "incident", Source: "demo"})
		return ask.Outcome{Answer: &gen.AnswerBody{Text: "Three.", Caveats: []gen.Caveat{}, Provenance: []gen.Provenance{},
			Sql: []string{}, Path: gen.AnswerPath{Speed: gen.AnswerPathSpeedFast, Detail: "catalog"}}}
	})
	srv, err := server.New(server.Options{Runner: runner, Authenticator: fakeAuth{}})
	if err != nil {
		fmt.Println(err)
		return
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	defer func() { _ = srv.Shutdown(context.Background()) }()

	ctx := context.Background()
	c, _ := gen.NewClientWithResponses(ts.URL+"/ask", gen.WithRequestEditorFn(bearer(alice)))
	conv, _ := c.CreateConversationWithResponse(ctx, nil, gen.CreateConversationRequest{})
	ticket, _ := c.CreateAskWithResponse(ctx, conv.JSON201.Id, nil, gen.AskRequest{Question: "How many sev1 incidents?"})
	wait := "wait=10"
	st, _ := c.GetAskWithResponse(ctx, ticket.JSON202.Ticket, &gen.GetAskParams{Prefer: &wait})
	fmt.Println(ticket.StatusCode(), st.JSON200.State, st.JSON200.Done.Outcome, st.JSON200.LastSeq)
	// Output: 202 answer answer 6
}
