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
