package source_test

import (
	"slices"
	"testing"

	"github.com/das-ask/ask/demo/source"
)

func TestToolMetadata(t *testing.T) {
	_, srv := start(t, source.Options{})
	cs := connect(t, srv, "tok-alice")
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]string{
		"search_catalog": {"grounding", "catalog.search"},
		"define_term":    {"grounding", "catalog.define"},
		"list_tables":    {"discovering", "schema.list"},
		"describe_table": {"discovering", "schema.describe"},
		"run_query":      {"querying", "query"},
	}
	if len(res.Tools) != len(want) {
		t.Errorf("got %d tools, want %d", len(res.Tools), len(want))
	}
	for _, tool := range res.Tools {
		w, ok := want[tool.Name]
		if !ok {
			t.Errorf("unexpected tool %q", tool.Name)
			continue
		}
		if got := [2]string{str(tool.Meta["ask/phase"]), str(tool.Meta["ask/role"])}; got != w {
			t.Errorf("%s: phase/role = %v, want %v", tool.Name, got, w)
		}
		if tool.Annotations == nil || !tool.Annotations.ReadOnlyHint {
			t.Errorf("%s: not annotated read-only", tool.Name)
		}
	}
}

func str(v any) string { s, _ := v.(string); return s }

func TestCatalogTools(t *testing.T) {
	_, srv := start(t, source.Options{})
	cs := connect(t, srv, "tok-bob")

	type search struct {
		Query string `json:"query"`
		Terms []struct {
			Term    string `json:"term"`
			Summary string `json:"summary"`
		} `json:"terms"`
	}
	for _, tc := range []struct {
		query string
		first string // "" = no terms
	}{
		{"change failure rate", "change failure rate"},
		{"What does change failure rate mean?", "change failure rate"},
		{"CFR", "change failure rate"},
		{"sev1 incidents", "incident"}, // and severity, checked below
		{"mean time to resolve", "MTTR"},
		{"on-call pay", "on-call compensation"},
		{"deployments", "deployment"},
		{"customer churn rate", ""},
		{"churn", ""},
	} {
		var got search
		structured(t, call(t, cs, "s-"+tc.query, "search_catalog", map[string]any{"query": tc.query}), &got)
		if got.Query != tc.query {
			t.Errorf("%q: echoed query %q", tc.query, got.Query)
		}
		switch {
		case tc.first == "" && len(got.Terms) != 0:
			t.Errorf("%q: found %+v, want nothing", tc.query, got.Terms)
		case tc.first != "" && (len(got.Terms) == 0 || got.Terms[0].Term != tc.first):
			t.Errorf("%q: found %+v, want %q first", tc.query, got.Terms, tc.first)
		case tc.first != "" && got.Terms[0].Summary == "":
			t.Errorf("%q: empty summary", tc.query)
		}
		if got.Terms == nil {
			t.Errorf("%q: terms is null, want a list", tc.query)
		}
	}

	var both search
	structured(t, call(t, cs, "s-both", "search_catalog", map[string]any{"query": "sev1 incidents"}), &both)
	if len(both.Terms) != 2 || both.Terms[1].Term != "severity" {
		t.Errorf("sev1 incidents: found %+v, want incident and severity", both.Terms)
	}

	var def struct {
		Term       string   `json:"term"`
		Definition string   `json:"definition"`
		Source     string   `json:"source"`
		Kind       string   `json:"kind"`
		Caveats    []string `json:"caveats"`
		Tables     []string `json:"tables"`
	}
	structured(t, call(t, cs, "d1", "define_term", map[string]any{"term": "mttr"}), &def)
	if def.Term != "MTTR" || def.Kind != "glossary_term" || def.Source == "" || def.Definition == "" ||
		len(def.Caveats) == 0 || !slices.Equal(def.Tables, []string{"incidents"}) {
		t.Errorf("define MTTR = %+v", def)
	}
	structured(t, call(t, cs, "d2", "define_term", map[string]any{"term": "SLO"}), &def)
	if def.Tables == nil || len(def.Tables) != 0 {
		t.Errorf("SLO is answerable from the catalog alone: tables = %#v, want []", def.Tables)
	}
	for _, term := range []string{"incident", "severity", "MTTR", "deployment", "deployment frequency",
		"change failure rate", "service tier", "SLO", "on-call compensation"} {
		if res := call(t, cs, "d-"+term, "define_term", map[string]any{"term": term}); res.IsError {
			t.Errorf("define %q: %s", term, text(res))
		}
	}
	res := call(t, cs, "d3", "define_term", map[string]any{"term": "churn"})
	if !res.IsError || refusal(res) != "" {
		t.Errorf("define churn: isError=%v refusal=%q, want a plain tool error", res.IsError, refusal(res))
	}
	res = call(t, cs, "d4", "define_term", map[string]any{"word": "MTTR"})
	if !res.IsError || refusal(res) != "" {
		t.Errorf("unknown argument: isError=%v refusal=%q, want a plain tool error", res.IsError, refusal(res))
	}
}

func TestSchemaTools(t *testing.T) {
	_, srv := start(t, source.Options{})
	cs := connect(t, srv, "tok-bob")
	var list struct {
		Tables []struct{ Name, Description string } `json:"tables"`
	}
	structured(t, call(t, cs, "l1", "list_tables", map[string]any{}), &list)
	var names []string
	for _, tb := range list.Tables {
		names = append(names, tb.Name)
		if tb.Description == "" {
			t.Errorf("%s: no description", tb.Name)
		}
	}
	if want := []string{"teams", "services", "incidents", "deployments", "oncall_pay"}; !slices.Equal(names, want) {
		t.Errorf("tables = %v, want %v", names, want)
	}

	var desc struct {
		Table   string `json:"table"`
		Columns []struct {
			Name, Type, Description string
		} `json:"columns"`
	}
	structured(t, call(t, cs, "l2", "describe_table", map[string]any{"table": "incidents"}), &desc)
	var cols []string
	for _, c := range desc.Columns {
		cols = append(cols, c.Name)
		if c.Type == "" || c.Description == "" {
			t.Errorf("incidents.%s: type %q description %q", c.Name, c.Type, c.Description)
		}
	}
	if want := []string{"id", "service_id", "severity", "opened_at", "resolved_at", "quarter"}; desc.Table != "incidents" || !slices.Equal(cols, want) {
		t.Errorf("describe incidents = %s %v, want %v", desc.Table, cols, want)
	}
	res := call(t, cs, "l3", "describe_table", map[string]any{"table": "customers"})
	if !res.IsError || refusal(res) != "" {
		t.Errorf("unknown table: isError=%v refusal=%q, want a plain tool error", res.IsError, refusal(res))
	}
}

// A call that leaves out a required argument (the schema says so, but nothing makes a model obey
// it) is told which one, as a plain tool error the model can correct: not "no term \"\"" followed
// by the whole glossary, nor "no table \"\"".
func TestMissingRequiredArgument(t *testing.T) {
	_, srv := start(t, source.Options{})
	cs := connect(t, srv, "tok-bob")
	for tool, want := range map[string]string{
		"search_catalog": "query is required",
		"define_term":    "term is required",
		"describe_table": "table is required",
	} {
		for _, args := range []any{map[string]any{}, nil} {
			res := call(t, cs, "m-"+tool, tool, args)
			if !res.IsError || refusal(res) != "" || text(res) != want {
				t.Errorf("%s(%v): isError=%v refusal=%q text %q, want a plain tool error %q", tool, args, res.IsError, refusal(res), text(res), want)
			}
		}
	}
}
