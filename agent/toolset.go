package agent

import (
	"github.com/das-ask/ask/agent/model"
	"github.com/das-ask/ask/agent/source"
)

// toolset is every tool of a run's sources under the name the model sees. A tool's own name is
// used unless two sources offer the same name; then each is shown as "<source>__<tool>".
type toolset struct {
	specs  []model.ToolSpec
	byName map[string]boundTool
}

type boundTool struct {
	source.Tool
	session *source.Session
}

func newToolset(sessions []*source.Session) toolset {
	count := map[string]int{}
	for _, s := range sessions {
		for _, t := range s.Tools() {
			count[t.Name]++
		}
	}
	ts := toolset{byName: map[string]boundTool{}}
	for _, s := range sessions {
		for _, t := range s.Tools() {
			name := t.Name
			if count[name] > 1 {
				name = s.Name() + "__" + t.Name
			}
			ts.byName[name] = boundTool{Tool: t, session: s}
			ts.specs = append(ts.specs, model.ToolSpec{Name: name, Description: t.Description, InputSchema: t.InputSchema})
		}
	}
	return ts
}

func (ts toolset) lookup(name string) (boundTool, bool) {
	t, ok := ts.byName[name]
	return t, ok
}

// renamer maps a tool's name in sub (a branch's toolset, over some of ts's sessions) to its name
// in ts; a name sub does not offer (a call the model made up) is kept.
func (ts toolset) renamer(sub toolset) func(string) string {
	type key struct {
		s    *source.Session
		tool string
	}
	names := map[key]string{}
	for name, t := range ts.byName {
		names[key{t.session, t.Name}] = name
	}
	return func(name string) string {
		if t, ok := sub.lookup(name); ok {
			if n, ok := names[key{t.session, t.Name}]; ok {
				return n
			}
		}
		return name
	}
}
