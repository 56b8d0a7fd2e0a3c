package llmstub

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"text/template"
)

// templateData is what every template of a script can read; see the package documentation.
type templateData struct {
	// Match holds the question's captures: named groups by name, every group by its number
	// ("0" is the whole match).
	Match map[string]string
	// History holds the captures of the rule's from_history pattern in the prior message it
	// matched, keyed like Match; empty when the rule has no from_history.
	History map[string]string
	// Results holds the parsed JSON of this ask's tool results, one per step taken so far.
	Results []any
	// Last is the last element of Results, or nil before the first step.
	Last any
	// Empty is true when the final prose was reached through if_empty.
	Empty bool
	// Failed is set when the final prose is an apology for a failed tool call.
	Failed *failedCall
	// Tool names the scripted tool the request did not offer, for the built-in reply.
	Tool string
}

type failedCall struct {
	// Tool is the name of the tool whose result was an error; Message is that result's text.
	Tool, Message string
}

// templateFuncs are the functions a script's templates may call.
func templateFuncs() template.FuncMap {
	return template.FuncMap{
		// json renders v as JSON text.
		"json": func(v any) (string, error) {
			b, err := json.Marshal(v)
			return string(b), err
		},
		// sqlquote renders s as a SQL string literal, doubling embedded quotes, so a value taken
		// from a question or a prior turn can never break out of the literal.
		"sqlquote": func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" },
		// defined reports whether one of the results is a definition of term (an object whose
		// "term" equals it, ignoring case, with a non-empty "definition"): what a model would
		// write differently once it knows what the catalog means by a word.
		"defined": func(results []any, term string) bool {
			for _, r := range results {
				if m, ok := r.(map[string]any); ok {
					t, _ := m["term"].(string)
					d, _ := m["definition"].(string)
					if strings.EqualFold(t, term) && d != "" {
						return true
					}
				}
			}
			return false
		},
		// rows is a query result's rows, or nil when v is not one (a definition, say), so that a
		// final prose can tell whether a query ran.
		"rows": func(v any) []any {
			if m, ok := v.(map[string]any); ok {
				if r, ok := m["rows"].([]any); ok && len(r) > 0 {
					return r
				}
			}
			return nil
		},
		"lower": strings.ToLower,
		"upper": strings.ToUpper,
	}
}

// prose compiles a prose template. Missing map keys are errors so that a script reading a field a
// tool did not return fails loudly instead of saying "<no value>".
func prose(name, text string) (*template.Template, error) {
	t, err := template.New(name).Funcs(templateFuncs()).Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return t, nil
}

func render(t *template.Template, data *templateData) (string, error) {
	var b strings.Builder
	if err := t.Execute(&b, data); err != nil {
		return "", err
	}
	return b.String(), nil
}

// valueTemplate renders one YAML value of a step's args: strings are templates, maps and lists are
// rendered element by element, other scalars are kept as they are. A step without args has a nil
// map, which renders as {}.
type valueTemplate func(data *templateData) (any, error)

func compileValue(path string, v any) (valueTemplate, error) {
	switch x := v.(type) {
	case string:
		t, err := prose(path, x)
		if err != nil {
			return nil, err
		}
		return func(data *templateData) (any, error) { return render(t, data) }, nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		fields := make([]valueTemplate, len(keys))
		for i, k := range keys {
			f, err := compileValue(path+"."+k, x[k])
			if err != nil {
				return nil, err
			}
			fields[i] = f
		}
		return func(data *templateData) (any, error) {
			out := make(map[string]any, len(keys))
			for i, k := range keys {
				v, err := fields[i](data)
				if err != nil {
					return nil, err
				}
				out[k] = v
			}
			return out, nil
		}, nil
	case []any:
		elems := make([]valueTemplate, len(x))
		for i, e := range x {
			f, err := compileValue(fmt.Sprintf("%s[%d]", path, i), e)
			if err != nil {
				return nil, err
			}
			elems[i] = f
		}
		return func(data *templateData) (any, error) {
			out := make([]any, len(elems))
			for i, f := range elems {
				v, err := f(data)
				if err != nil {
					return nil, err
				}
				out[i] = v
			}
			return out, nil
		}, nil
	case nil:
		return func(*templateData) (any, error) { return nil, nil }, nil
	case bool, int, int64, uint64, float64:
		return func(*templateData) (any, error) { return x, nil }, nil
	default:
		return nil, fmt.Errorf("%s: unsupported value of type %T", path, v)
	}
}

// captures returns a regexp match's groups keyed by name and by number.
func captures(names []string, m []string) map[string]string {
	out := make(map[string]string, 2*len(m))
	for i, v := range m {
		out[fmt.Sprint(i)] = v
		if i < len(names) && names[i] != "" {
			out[names[i]] = v
		}
	}
	return out
}
