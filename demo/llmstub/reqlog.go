package llmstub

import "sync"

// StatusClientClosed is recorded as Received.Status when the client went away before the stub
// answered, e.g. during a scripted delay (nginx's convention; nothing is written to the wire).
const StatusClientClosed = 499

// Received is one request the stub served, as its log records it: what the model was asked and
// what it answered. Tests read it to prove what the model was (or was not) asked.
//
// It holds the messages as sent, question text included, because that is what a model receives;
// the log lives in memory only and is never written to the stub's logger. The bearer key is not
// recorded.
type Received struct {
	// Seq numbers requests from 1 in the order the stub finished them.
	Seq    int    `json:"seq"`
	Method string `json:"method"`
	Path   string `json:"path"`
	// Status is the HTTP status answered, or StatusClientClosed.
	Status int `json:"status"`
	// Error is the message of an error response.
	Error string `json:"error,omitempty"`

	// The request, for a chat completion that parsed.
	Model    string    `json:"model,omitempty"`
	Stream   bool      `json:"stream,omitempty"`
	Messages []Message `json:"messages,omitempty"`
	// Tools lists the offered function names (none when tool_choice was "none").
	Tools []string `json:"tools,omitempty"`

	// The reply: the rule that matched, how the turn was decided (one of the Decision constants),
	// and either the tool call made or the prose said.
	Rule     string    `json:"rule,omitempty"`
	Decision string    `json:"decision,omitempty"`
	ToolCall *ToolCall `json:"tool_call,omitempty"`
	Content  string    `json:"content,omitempty"`
}

// requestLog is a bounded, concurrency-safe record of Received, oldest dropped first.
type requestLog struct {
	mu    sync.Mutex
	max   int
	seq   int
	items []Received
}

func (l *requestLog) add(r Received) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	r.Seq = l.seq
	if len(l.items) >= l.max {
		l.items = append(l.items[:0], l.items[len(l.items)-l.max+1:]...)
	}
	l.items = append(l.items, r)
}

func (l *requestLog) list() []Received {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Received{}, l.items...)
}

func (l *requestLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.items = nil
}
