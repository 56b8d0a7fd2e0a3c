package agent

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strings"

	"github.com/das-ask/ask/agent/model"
	"github.com/das-ask/ask/agent/source"
)

// maxModelName is the longest tool name the model providers take: OpenAI's function names and
// Anthropic's tool names both match ^[a-zA-Z0-9_-]{1,64}$, and a request offering any other is
// refused with a 400.
const maxModelName = 64

// toolset is every tool of a run's sources under the name the model sees (see modelNames); the
// tool is called at its source under its own name, which is also the one steps, milestones,
// refusals and the source's audit show.
type toolset struct {
	specs  []model.ToolSpec
	byName map[string]boundTool
}

type boundTool struct {
	source.Tool
	session *source.Session
}

func newToolset(sessions []*source.Session) toolset {
	var tools []source.Tool
	var owners []*source.Session
	for _, s := range sessions {
		for _, t := range s.Tools() {
			tools = append(tools, t)
			owners = append(owners, s)
		}
	}
	names := modelNames(tools)
	ts := toolset{byName: make(map[string]boundTool, len(tools))}
	for i, t := range tools {
		ts.byName[names[i]] = boundTool{Tool: t, session: owners[i]}
		ts.specs = append(ts.specs, model.ToolSpec{Name: names[i], Description: t.Description, InputSchema: t.InputSchema})
	}
	return ts
}

// modelNames names tools (in DAS_SOURCES order, each source's in its listing order) for the
// model: every name matches ^[a-zA-Z0-9_-]{1,64}$, no two are the same, and the same tools get
// the same names in every run, so prompts (and a provider's prompt cache) stay the same.
//
//  1. A tool is shown under its own name; when two sources offer the same name, each as
//     "<source>__<tool>".
//  2. Every character outside [a-zA-Z0-9_-] becomes '_' ("catalog.search" → "catalog_search").
//  3. A name that is now longer than 64 characters, or that another tool's name became too
//     (say "a.b" and "a/b"), is cut to 55 characters (a source's name first, down to 8) and given
//     '_' and 8 hex digits of a hash of the source's name and the tool's own ("a_b_" and the
//     digits). A name that needed no change keeps
//     it when only changed names became the same as it: a source adding "a.b" does not rename
//     its "a_b".
func modelNames(tools []source.Tool) []string {
	count := map[string]int{}
	for _, t := range tools {
		count[t.Name]++
	}
	want := make([]string, len(tools))
	prefix := make([]string, len(tools)) // the source's part of want, when it has one
	exact := make([]bool, len(tools))    // want is the tool's own name, unchanged
	for i, t := range tools {
		want[i] = sanitize(t.Name)
		if count[t.Name] > 1 {
			prefix[i] = sanitize(t.Source)
			want[i] = prefix[i] + "__" + want[i]
		}
		exact[i] = want[i] == t.Name && len(want[i]) <= maxModelName
	}
	// How many tools want each name, counting the exact ones apart: an exact name is taken by its
	// tool when it is the only exact one, whatever the changed names want.
	wanted, wantedExact := map[string]int{}, map[string]int{}
	for i, w := range want {
		wanted[w]++
		if exact[i] {
			wantedExact[w]++
		}
	}
	out := make([]string, len(tools))
	taken := map[string]bool{}
	for i, w := range want {
		switch {
		case exact[i] && wantedExact[w] == 1,
			!exact[i] && len(w) <= maxModelName && wanted[w] == 1:
			out[i] = w
			taken[w] = true
		}
	}
	for i, w := range want {
		if out[i] != "" {
			continue
		}
		// Of a hundred hashed names, two share 32 bits of hash about once in 870,000
		// configurations; salt settles that too, in the same way in every run.
		for salt := uint32(0); ; salt++ {
			n := hashed(prefix[i], w[len(prefix[i]):], tools[i].Source, tools[i].Name, salt)
			if !taken[n] {
				out[i] = n
				taken[n] = true
				break
			}
		}
	}
	return out
}

// sanitize replaces every character outside [a-zA-Z0-9_-] with '_', one for each character.
func sanitize(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r == '-' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') {
			return r
		}
		return '_'
	}, name)
}

// hashed is prefix+rest (sanitized, so ASCII; rest is the tool's part, "__" first when there is
// a prefix) cut to leave room for '_' and 8 hex digits of a hash of the tool's source and own
// name. The source's part is cut first, down to 8 characters: the tool's own name says more to
// the model.
func hashed(prefix, rest, src, tool string, salt uint32) string {
	h := sha256.New()
	h.Write([]byte(src))
	h.Write([]byte{0})
	h.Write([]byte(tool))
	if salt > 0 {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], salt)
		h.Write(b[:])
	}
	sum := h.Sum(nil)
	const room = maxModelName - 1 - 8
	if over := len(prefix) + len(rest) - room; over > 0 {
		prefix = prefix[:len(prefix)-min(over, max(len(prefix)-8, 0))]
	}
	want := prefix + rest
	if len(want) > room {
		want = want[:room]
	}
	return want + "_" + hex.EncodeToString(sum[:4])
}

func (ts toolset) lookup(name string) (boundTool, bool) {
	t, ok := ts.byName[name]
	return t, ok
}

// renamer maps a tool's name in sub (a branch's toolset, over some of ts's sessions) to its name
// in ts; a name sub does not offer (a call the model made up) is kept. The two name the same tool
// differently when the run's other sources decide its name in ts (rule 1 of modelNames, or a
// hash of rule 3), so the map goes through the tool itself: its session and own name.
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
