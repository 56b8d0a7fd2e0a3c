package llmstub

import (
	"encoding/json"
	"fmt"
	"reflect"
)

// decideGoal picks the next turn of a rule in goal mode. Its steps are goals, not a sequence,
// which is how a model behaves when what it is offered, or what it already knows, changes: the
// next call is the first step whose tool is offered and whose call — rendered with the results
// so far — has not been made since the question; a step whose tool is not offered is skipped,
// and when no step is left the reply is the final prose. A call made earlier (by this agent or
// one it delegated to) counts as made only when it had the same tool and the same arguments, so
// a step whose arguments depend on what a result said (a query written from a definition) is
// made again once that result is known. A step with if_empty ends the turn, as in sequence
// mode, when the last result is empty.
func (s *Script) decideGoal(rp reply, r *rule, turns []toolResult, data *templateData, offered []string) (reply, error) {
	for i, st := range r.steps {
		name, ok := resolveTool(st.tool, offered)
		if !ok {
			continue
		}
		args, err := st.args(data)
		if err != nil {
			return rp, fmt.Errorf("rule %q step %d args: %w", r.name, i, err)
		}
		if made(turns, name, st.tool, args) {
			continue
		}
		if st.ifEmpty && len(turns) > 0 && isEmpty(data.Last) {
			data.Empty = true
			rp.decision = DecisionEmpty
			return rp.prose(r.final, data)
		}
		argJSON, err := json.Marshal(args)
		if err != nil {
			return rp, fmt.Errorf("rule %q step %d args: %w", r.name, i, err)
		}
		rp.decision, rp.step, rp.delay = DecisionToolCall, i, st.delay
		rp.call = &ToolCall{ID: rp.id("call_", len(turns)), Name: name, Arguments: string(argJSON)}
		return rp, nil
	}
	rp.decision = DecisionFinal
	return rp.prose(r.final, data)
}

// made reports whether one of turns called the tool (by its offered or its scripted name) with
// args.
func made(turns []toolResult, offered, scripted string, args any) bool {
	want, err := json.Marshal(args)
	if err != nil {
		return false
	}
	var w any
	if json.Unmarshal(want, &w) != nil {
		return false
	}
	for _, t := range turns {
		if t.tool != offered && t.tool != scripted && !endsWithTool(t.tool, scripted) {
			continue
		}
		var got any
		if json.Unmarshal([]byte(t.args), &got) == nil && reflect.DeepEqual(got, w) {
			return true
		}
	}
	return false
}

func endsWithTool(name, want string) bool {
	n, w := len(name), len(want)
	return n > w+1 && name[n-w:] == want && (name[n-w-1] == '_' || name[n-w-1] == '-')
}
