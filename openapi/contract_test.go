package openapi_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/openapi"
)

func loadSpec(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi.Load(t.Context())
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	return doc
}

func TestSpecIsValidOpenAPI(t *testing.T) {
	doc := loadSpec(t)
	if got, want := doc.OpenAPI, "3.0.3"; got != want {
		t.Errorf("openapi version = %q, want %q", got, want)
	}
	// The embedded spec the validator uses is the same document.
	embedded, err := gen.GetSpec()
	if err != nil {
		t.Fatalf("gen.GetSpec: %v", err)
	}
	if got, want := len(embedded.Paths.Map()), len(doc.Paths.Map()); got != want {
		t.Errorf("embedded spec has %d paths, file has %d: regenerate", got, want)
	}
}

// Every call except the published schema requires the bearer, and every error is problem+json
// but the one the document names as its exception: 431, answered by the HTTP layer in text/plain.
func TestEveryCallIsSecuredAndErrorsAreProblems(t *testing.T) {
	doc := loadSpec(t)
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			public := strings.HasPrefix(path, "/v1/openapi.")
			secured := op.Security == nil || len(*op.Security) > 0 // nil inherits the global bearerAuth
			if public == secured {
				t.Errorf("%s %s: secured=%v, want %v", method, path, secured, !public)
			}
			for code, ref := range op.Responses.Map() {
				if code[0] != '4' && code[0] != '5' {
					continue
				}
				if code == "431" {
					if ref.Value.Content.Get("text/plain") == nil || !strings.Contains(doc.Info.Description, "`431`") {
						t.Errorf("%s %s 431: want text/plain, named as the exception in the description", method, path)
					}
					continue
				}
				if ref.Value.Content.Get("application/problem+json") == nil {
					t.Errorf("%s %s %s: not application/problem+json", method, path, code)
				}
			}
		}
	}
}

func sampleEvents() []any {
	env := gen.EventEnvelope{Seq: 7, Ticket: "tk_x", ConversationId: "cv_y", Ts: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	rows := [][]interface{}{{"Payments", float64(57)}}
	src := "demo"
	return []any{
		gen.AcceptedEvent{Seq: env.Seq, Ticket: env.Ticket, ConversationId: env.ConversationId, Ts: env.Ts, Type: gen.AcceptedEventTypeAccepted, Question: "q"},
		gen.BranchEvent{Seq: env.Seq, Ticket: env.Ticket, ConversationId: env.ConversationId, Ts: env.Ts, Type: gen.BranchEventTypeBranch, BranchId: "b1", Role: "supervisor", State: gen.BranchEventStateOpen},
		gen.StepEvent{Seq: env.Seq, Ticket: env.Ticket, ConversationId: env.ConversationId, Ts: env.Ts, Type: gen.StepEventTypeStep, CallId: "c1", Tool: "run_query", Source: "demo", Args: map[string]interface{}{"sql": "SELECT 1"}, Ms: 12},
		gen.MilestoneEvent{Seq: env.Seq, Ticket: env.Ticket, ConversationId: env.ConversationId, Ts: env.Ts, Type: gen.MilestoneEventTypeMilestone, Phase: gen.MilestonePhaseGrounding, Subject: "incident", Source: "demo"},
		gen.AnswerEvent{Seq: env.Seq, Ticket: env.Ticket, ConversationId: env.ConversationId, Ts: env.Ts, Type: gen.AnswerEventTypeAnswer,
			Text: "Payments had the most incidents.", Result: &gen.ResultSet{Columns: []string{"team", "incidents"}, Rows: rows},
			Caveats:    []gen.Caveat{{Term: "incident", Text: "sev3 before 2025-Q2 is incomplete", Source: src}},
			Path:       gen.AnswerPath{Speed: gen.AnswerPathSpeedFull, Detail: "warehouse"},
			Provenance: []gen.Provenance{{Term: "incident", Statement: "An unplanned interruption.", Source: src, Kind: "glossary_term"}},
			Sql:        []string{"SELECT 1"}},
		gen.AbstentionEvent{Seq: env.Seq, Ticket: env.Ticket, ConversationId: env.ConversationId, Ts: env.Ts, Type: gen.AbstentionEventTypeAbstention, Terms: []string{"churn"}},
		gen.RefusalEvent{Seq: env.Seq, Ticket: env.Ticket, ConversationId: env.ConversationId, Ts: env.Ts, Type: gen.RefusalEventTypeRefusal, Tool: "run_query", Source: src, CallId: "c2", Reason: "forbidden"},
		gen.ErrorEvent{Seq: env.Seq, Ticket: env.Ticket, ConversationId: env.ConversationId, Ts: env.Ts, Type: gen.ErrorEventTypeError, Kind: gen.ErrorKindCancelled, Message: "cancelled by the caller"},
		gen.DoneEvent{Seq: env.Seq, Ticket: env.Ticket, ConversationId: env.ConversationId, Ts: env.Ts, Type: gen.DoneEventTypeDone, Outcome: gen.DoneEventOutcomeAnswer, Steps: 4, ModelCalls: 5, InputTokens: 100, OutputTokens: 20, ElapsedMs: 1234},
	}
}

// Every event type survives marshal → the generated union → discriminator → the right Go type,
// and what Go marshals is valid against the published Event schema.
func TestEventRoundTripThroughUnion(t *testing.T) {
	doc := loadSpec(t)
	eventSchema := doc.Components.Schemas["Event"].Value
	seen := map[string]bool{}
	for _, want := range sampleEvents() {
		name := reflect.TypeOf(want).Name()
		t.Run(name, func(t *testing.T) {
			b, err := json.Marshal(want)
			if err != nil {
				t.Fatal(err)
			}
			var generic any
			if err := json.Unmarshal(b, &generic); err != nil {
				t.Fatal(err)
			}
			if err := eventSchema.VisitJSON(generic); err != nil {
				t.Fatalf("%s does not validate against Event: %v\n%s", name, err, b)
			}
			var ev gen.Event
			if err := json.Unmarshal(b, &ev); err != nil {
				t.Fatal(err)
			}
			typ, err := ev.Discriminator()
			if err != nil {
				t.Fatal(err)
			}
			seen[typ] = true
			got, err := ev.ValueByDiscriminator()
			if err != nil {
				t.Fatal(err)
			}
			if reflect.TypeOf(got) != reflect.TypeOf(want) {
				t.Fatalf("type %q decoded as %T, want %T", typ, got, want)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("round trip changed the event:\n got %#v\nwant %#v", got, want)
			}
		})
	}
	enum := doc.Components.Schemas["EventType"].Value.Enum
	if len(seen) != len(enum) {
		t.Errorf("round-tripped %d event types, the contract has %d", len(seen), len(enum))
	}
}

func TestUnknownEventTypeIsAnError(t *testing.T) {
	for _, raw := range []string{
		`{"seq":1,"ticket":"t","conversation_id":"c","ts":"2026-11-29T12:00:00Z","type":"telepathy"}`,
		`{"seq":1,"ticket":"t","conversation_id":"c","ts":"2026-11-29T12:00:00Z"}`,
	} {
		var ev gen.Event
		if err := json.Unmarshal([]byte(raw), &ev); err != nil {
			t.Fatal(err)
		}
		if v, err := ev.ValueByDiscriminator(); err == nil {
			t.Errorf("%s decoded as %T, want an error", raw, v)
		}
	}
}

// A schema violation in an event is caught by the published schema, not silently accepted.
func TestInvalidEventsFailTheSchema(t *testing.T) {
	doc := loadSpec(t)
	eventSchema := doc.Components.Schemas["Event"].Value
	for name, raw := range map[string]string{
		"seq zero":            `{"seq":0,"ticket":"t","conversation_id":"c","ts":"2026-11-29T12:00:00Z","type":"accepted","question":"q"}`,
		"answer no path":      `{"seq":1,"ticket":"t","conversation_id":"c","ts":"2026-11-29T12:00:00Z","type":"answer","text":"x","caveats":[],"provenance":[],"sql":[],"divergence":null}`,
		"unknown error kind":  `{"seq":1,"ticket":"t","conversation_id":"c","ts":"2026-11-29T12:00:00Z","type":"error","kind":"oops","message":"m"}`,
		"bad milestone phase": `{"seq":1,"ticket":"t","conversation_id":"c","ts":"2026-11-29T12:00:00Z","type":"milestone","phase":"thinking","subject":"s","source":"d"}`,
	} {
		var v any
		if err := json.Unmarshal([]byte(raw), &v); err != nil {
			t.Fatal(err)
		}
		if err := eventSchema.VisitJSON(v); err == nil {
			t.Errorf("%s: validated, want a schema error", name)
		}
	}
}
