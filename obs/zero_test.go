package obs_test

import (
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/das-ask/ask/obs"
)

// The series whose labels are known in advance exist at zero before anything is counted: every
// outcome (and every error kind of the contract) in ask_asks_total, every event type of the
// contract in ask_events_emitted_total, and every reason on both routes in
// ask_admission_refusals_total. One that appeared only at its first increment would be missed
// by rate() and increase() at its start, and an alert on it blind until then. The contract's
// enums are read from the contract (openapi/ask.openapi.yaml), so a kind or type added there is made too.
func TestKnownSeriesStartAtZero(t *testing.T) {
	spec, err := openapi3.NewLoader().LoadFromFile("../openapi/ask.openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	enum := func(schema string) []string {
		s := spec.Components.Schemas[schema]
		if s == nil || s.Value == nil || len(s.Value.Enum) == 0 {
			t.Fatalf("the contract has no enum %s", schema)
		}
		var out []string
		for _, v := range s.Value.Enum {
			out = append(out, v.(string))
		}
		return out
	}
	fams, err := obs.NewMetrics().Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]map[string]float64{} // family → label pairs → value
	for _, f := range fams {
		m := map[string]float64{}
		for _, s := range f.GetMetric() {
			key := ""
			for _, l := range s.GetLabel() {
				key += l.GetName() + "=" + l.GetValue() + ","
			}
			m[key] = s.GetCounter().GetValue()
		}
		series[f.GetName()] = m
	}
	want := func(family, key string) {
		t.Helper()
		v, ok := series[family][key]
		if !ok {
			t.Errorf("%s{%s} is not there before anything is counted", family, key)
		} else if v != 0 {
			t.Errorf("%s{%s} = %v, want 0", family, key, v)
		}
	}
	for _, o := range []string{"answer", "abstention", "refusal"} {
		want("ask_asks_total", "kind=,outcome="+o+",")
	}
	for _, k := range enum("ErrorKind") {
		want("ask_asks_total", "kind="+k+",outcome=error,")
	}
	for _, e := range enum("EventType") {
		want("ask_events_emitted_total", "type="+e+",")
	}
	for _, route := range []string{"create_conversation", "create_ask"} {
		for _, reason := range []string{"bad_request", "unauthorized", "not_found", "conflict", "conversation_full", "too_large",
			"unsupported_media_type", "too_many_in_flight", "too_many_held", "full", "shutting_down", "unavailable", "other"} {
			want("ask_admission_refusals_total", "reason="+reason+",route="+route+",")
		}
	}
}
