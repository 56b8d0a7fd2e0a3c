package client

import (
	"bytes"
	"encoding/json"

	"github.com/das-ask/ask/gen"
)

// The generated types decode a missing field as its zero value, so an answer without text was
// printed as an empty answer and an error without kind as "The run failed (): …". contractFault
// says which field an outcome, branch or milestone event lacks, by the rules of the Python and
// TypeScript clients (_EVENT_FIELDS, eventFields): each required field present and not null,
// each item of its lists likewise, and within the objects an answer holds, their required
// fields. The types of the fields that are present are the generated decoder's to check.
//
// It decodes the data once more, into flags that hold no copy of it; only these event types
// (a handful a run) pay for it, never a step.

// present is set when its field is in the data and not null.
type present bool

func (p *present) UnmarshalJSON(b []byte) error {
	*p = present(!bytes.Equal(b, []byte("null")))
	return nil
}

// keyed is set when its field is in the data, null included (a headline's value may be null).
type keyed bool

func (k *keyed) UnmarshalJSON([]byte) error {
	*k = true
	return nil
}

type headlineFields struct {
	Label present `json:"label"`
	Value keyed   `json:"value"`
}

type resultFields struct {
	Columns   []present `json:"columns"`
	Rows      []present `json:"rows"`
	Truncated present   `json:"truncated"`
}

// eventFields holds, for every type contractFault checks, the fields it looks at (a name that
// two types share, such as text or source, is one field).
type eventFields struct {
	Text    present `json:"text"`
	Caveats []struct {
		Term   present `json:"term"`
		Text   present `json:"text"`
		Source present `json:"source"`
	} `json:"caveats"`
	Provenance []struct {
		Term      present `json:"term"`
		Statement present `json:"statement"`
		Source    present `json:"source"`
	} `json:"provenance"`
	SQL  []present `json:"sql"`
	Path *struct {
		Speed present `json:"speed"`
	} `json:"path"`
	Headline   *headlineFields `json:"headline"`
	Result     *resultFields   `json:"result"`
	Divergence *struct {
		Without  []present       `json:"without"`
		Result   *resultFields   `json:"result"`
		Headline *headlineFields `json:"headline"`
	} `json:"divergence"`

	Terms   []present `json:"terms"`
	Sources []present `json:"sources"`

	Tool   present `json:"tool"`
	Source present `json:"source"`
	Reason present `json:"reason"`

	Kind    present `json:"kind"`
	Message present `json:"message"`

	BranchID present `json:"branch_id"`
	Role     present `json:"role"`
	State    present `json:"state"`

	Phase   present `json:"phase"`
	Subject present `json:"subject"`
}

// contractFault says what in an event of type typ (already decoded into its generated type) is
// not the contract's, naming the field, never its value: "" when nothing is, and for a type it
// does not check. The wording is the Python and TypeScript clients'.
func contractFault(typ gen.EventType, raw []byte) string {
	switch typ {
	case gen.EventTypeAnswer, gen.EventTypeAbstention, gen.EventTypeRefusal, gen.EventTypeError, gen.EventTypeBranch, gen.EventTypeMilestone:
	default:
		return ""
	}
	var f eventFields
	if json.Unmarshal(raw, &f) != nil {
		return "" // the generated decoder read it; it cannot fail here
	}
	type check struct {
		name     string
		required bool
		there    bool // present and not null
		ok       bool // what it holds is the contract's
	}
	var checks []check
	switch typ {
	case gen.EventTypeAnswer:
		checks = []check{
			{"text", true, bool(f.Text), true},
			{"caveats", true, f.Caveats != nil, caveatsOK(f)},
			{"provenance", true, f.Provenance != nil, provenanceOK(f)},
			{"sql", true, f.SQL != nil, all(f.SQL)},
			{"path", true, f.Path != nil, f.Path != nil && bool(f.Path.Speed)},
			{"headline", false, f.Headline != nil, headlineOK(f.Headline)},
			{"result", false, f.Result != nil, resultOK(f.Result)},
			{"divergence", false, f.Divergence != nil, f.Divergence != nil && f.Divergence.Without != nil && all(f.Divergence.Without) &&
				f.Divergence.Result != nil && resultOK(f.Divergence.Result) && (f.Divergence.Headline == nil || headlineOK(f.Divergence.Headline))},
		}
	case gen.EventTypeAbstention:
		checks = []check{
			{"terms", true, f.Terms != nil, all(f.Terms)},
			{"sources", false, f.Sources != nil, all(f.Sources)},
		}
	case gen.EventTypeRefusal:
		checks = []check{{"tool", true, bool(f.Tool), true}, {"source", true, bool(f.Source), true}, {"reason", true, bool(f.Reason), true}}
	case gen.EventTypeError:
		checks = []check{{"kind", true, bool(f.Kind), true}, {"message", true, bool(f.Message), true}}
	case gen.EventTypeBranch:
		checks = []check{{"branch_id", true, bool(f.BranchID), true}, {"role", true, bool(f.Role), true}, {"state", true, bool(f.State), true}}
	case gen.EventTypeMilestone:
		checks = []check{{"phase", true, bool(f.Phase), true}, {"subject", true, bool(f.Subject), true}, {"source", true, bool(f.Source), true}}
	}
	for _, c := range checks {
		switch {
		case !c.there && c.required:
			return "the field " + c.name + " is missing"
		case c.there && !c.ok:
			return "the field " + c.name + " is not of the contract's type"
		}
	}
	return ""
}

func all(ps []present) bool {
	for _, p := range ps {
		if !p {
			return false
		}
	}
	return true
}

func caveatsOK(f eventFields) bool {
	for _, c := range f.Caveats {
		if !c.Term || !c.Text || !c.Source {
			return false
		}
	}
	return true
}

func provenanceOK(f eventFields) bool {
	for _, p := range f.Provenance {
		if !p.Term || !p.Statement || !p.Source {
			return false
		}
	}
	return true
}

func headlineOK(h *headlineFields) bool { return h != nil && bool(h.Label) && bool(h.Value) }

func resultOK(r *resultFields) bool {
	return r != nil && r.Columns != nil && all(r.Columns) && r.Rows != nil && all(r.Rows) && bool(r.Truncated)
}
