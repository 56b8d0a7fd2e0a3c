package llmstub

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"text/template"
	"time"
)

// Decisions, as recorded in Received.Decision.
const (
	// DecisionToolCall: the reply is the rule's next tool call.
	DecisionToolCall = "tool_call"
	// DecisionFinal: the rule's steps are done; the reply is its final prose.
	DecisionFinal = "final"
	// DecisionEmpty: a step's if_empty found the previous result empty; the reply is the final
	// prose with .Empty set.
	DecisionEmpty = "empty"
	// DecisionToolError: the previous tool result was an error; the reply is an apology.
	DecisionToolError = "tool_error"
	// DecisionNoHistory: the rule's from_history matched no prior message; the reply says the
	// reference cannot be resolved, and no tool is called.
	DecisionNoHistory = "no_history"
	// DecisionToolUnavailable: the request did not offer the tool the next step needs.
	DecisionToolUnavailable = "tool_unavailable"
	// DecisionNoRule: no rule matched the latest user message (or there is none).
	DecisionNoRule = "no_rule"
)

// reply is what the stub answers to one request.
type reply struct {
	rule     string // "" when no rule matched
	step     int    // index of the step whose tool is called; -1 for prose
	decision string
	call     *ToolCall // the tool call to make, or nil for prose
	content  string
	delay    time.Duration
	digest   [sha256.Size]byte // of the messages; seeds the response's ids
	cut      bool              // the output cap cut content or call's arguments (finish_reason "length")
}

// decide answers a request from its messages alone, like a real model: the latest user message
// picks the rule, the assistant tool-call turns since it say which step is next, and their tool
// results feed the templates. An error means a template failed to render, which is a script bug.
func (s *Script) decide(msgs []Message, offered []string) (reply, error) {
	rp := reply{step: -1, digest: digest(msgs)}
	u := -1
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			u = i
			break
		}
	}
	var r *rule
	data := &templateData{}
	if u >= 0 {
		for _, cand := range s.rules {
			if m := cand.pattern.FindStringSubmatch(msgs[u].Content); m != nil {
				r, data.Match = cand, captures(cand.pattern.SubexpNames(), m)
				break
			}
		}
	}
	if r == nil {
		rp.decision = DecisionNoRule
		return rp.prose(s.fallback, data)
	}
	rp.rule = r.name
	if r.history != nil {
		data.History = matchHistory(r.history, msgs[:u])
		if data.History == nil {
			rp.decision = DecisionNoHistory
			return rp.prose(r.otherwise, data)
		}
	}
	turns := toolTurns(msgs[u+1:])
	for _, t := range turns {
		data.Results = append(data.Results, t.value)
	}
	k := len(turns)
	if k > 0 {
		last := turns[k-1]
		data.Last = last.value
		if last.failed {
			data.Failed = &failedCall{Tool: last.tool, Message: last.text}
			rp.decision = DecisionToolError
			return rp.prose(r.onError, data)
		}
	}
	if r.goal {
		return s.decideGoal(rp, r, turns, data, offered)
	}
	if k >= len(r.steps) {
		rp.decision = DecisionFinal
		return rp.prose(r.final, data)
	}
	st := r.steps[k]
	if st.ifEmpty && isEmpty(data.Last) {
		data.Empty = true
		rp.decision = DecisionEmpty
		return rp.prose(r.final, data)
	}
	name, ok := resolveTool(st.tool, offered)
	if !ok {
		data.Tool = st.tool
		rp.decision = DecisionToolUnavailable
		return rp.prose(s.unavailable, data)
	}
	args, err := st.args(data)
	if err != nil {
		return rp, fmt.Errorf("rule %q step %d args: %w", r.name, k, err)
	}
	argJSON, err := json.Marshal(args)
	if err != nil {
		return rp, fmt.Errorf("rule %q step %d args: %w", r.name, k, err)
	}
	rp.decision, rp.step, rp.delay = DecisionToolCall, k, st.delay
	rp.call = &ToolCall{ID: rp.id("call_", k), Name: name, Arguments: string(argJSON)}
	return rp, nil
}

func (rp reply) prose(t *template.Template, data *templateData) (reply, error) {
	text, err := render(t, data)
	if err != nil {
		return rp, fmt.Errorf("rule %q %s prose: %w", rp.rule, rp.decision, err)
	}
	rp.content = text
	return rp, nil
}

// matchHistory returns the captures of h's pattern in the most recent message of h's role in
// prior (the messages before the latest user message) whose text matches, or nil.
func matchHistory(h *historyMatch, prior []Message) map[string]string {
	for i := len(prior) - 1; i >= 0; i-- {
		m := prior[i]
		if m.Role != h.role || m.Content == "" {
			continue
		}
		if sub := h.pattern.FindStringSubmatch(m.Content); sub != nil {
			return captures(h.pattern.SubexpNames(), sub)
		}
	}
	return nil
}

// resolveTool finds the offered function for a scripted tool: the same name, or else the first
// offered name that ends in "_"+want or "-"+want (an agent may prefix tools with their source).
// When several sources offer the tool, the first offered is called, as a model given two
// warehouses with the same tables picks one rather than none.
func resolveTool(want string, offered []string) (string, bool) {
	found := ""
	for _, o := range offered {
		if o == want {
			return o, true
		}
		if found == "" && (strings.HasSuffix(o, "_"+want) || strings.HasSuffix(o, "-"+want)) {
			found = o
		}
	}
	return found, found != ""
}

// digest hashes the conversation so that the same request always gets the same ids.
func digest(msgs []Message) [sha256.Size]byte {
	h := sha256.New()
	field := func(s string) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	for _, m := range msgs {
		field(m.Role)
		field(m.Content)
		field(m.ToolCallID)
		for _, c := range m.ToolCalls {
			field(c.ID)
			field(c.Name)
			field(c.Arguments)
		}
	}
	var out [sha256.Size]byte
	copy(out[:], h.Sum(nil))
	return out
}

// id derives a deterministic identifier from the request digest.
func (rp reply) id(prefix string, n int) string {
	h := sha256.New()
	h.Write(rp.digest[:])
	fmt.Fprintf(h, "%s%d", prefix, n)
	return prefix + hex.EncodeToString(h.Sum(nil))[:24]
}
