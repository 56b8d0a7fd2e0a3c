package server

import (
	"strconv"

	"github.com/das-ask/ask/gen"
)

// The bodies the service writes itself into every log (accepted, the branches, error and done)
// and the ticket it answers are encoded by hand: json.Marshal of an interface goes through
// reflection and allocates for each, and these are five of every ask's events. Each appender
// produces exactly json.Marshal's bytes (FuzzBodies holds them to it); a body of any other
// type, a runner's answer for one, goes through json.Marshal.

// appendBody appends body's JSON, an object, to dst when its type is one the service writes
// itself (a nil pointer is not), and reports whether it was.
func appendBody(dst []byte, body any) ([]byte, bool) {
	switch b := body.(type) {
	case gen.AcceptedBody:
		return appendAccepted(dst, b), true
	case gen.BranchBody:
		return appendBranch(dst, b), true
	case *gen.BranchBody:
		if b != nil {
			return appendBranch(dst, *b), true
		}
	case gen.DoneBody:
		return appendDone(dst, b), true
	case gen.ErrorBody:
		return appendError(dst, b), true
	case *gen.ErrorBody:
		if b != nil {
			return appendError(dst, *b), true
		}
	}
	return dst, false
}

// ownBody reports whether appendBody encodes body, and about how many bytes it takes (its
// strings' bytes and what surrounds them: escapes may take more).
func ownBody(body any) (size int, ok bool) {
	switch b := body.(type) {
	case gen.AcceptedBody:
		return 16 + len(b.Question), true
	case gen.BranchBody:
		return branchSize(&b), true
	case *gen.BranchBody:
		if b != nil {
			return branchSize(b), true
		}
	case gen.DoneBody:
		return 160, true
	case gen.ErrorBody:
		return 32 + len(b.Kind) + len(b.Message), true
	case *gen.ErrorBody:
		if b != nil {
			return 32 + len(b.Kind) + len(b.Message), true
		}
	}
	return 0, false
}

func branchSize(b *gen.BranchBody) int {
	n := 48 + len(b.BranchId) + len(b.Role) + len(b.State)
	if b.Parent != nil {
		n += 12 + len(*b.Parent)
	}
	if b.Source != nil {
		n += 12 + len(*b.Source)
	}
	return n
}

func appendAccepted(dst []byte, b gen.AcceptedBody) []byte {
	dst = append(dst, `{"question":`...)
	dst = appendJSONString(dst, b.Question)
	return append(dst, '}')
}

func appendBranch(dst []byte, b gen.BranchBody) []byte {
	dst = append(dst, `{"branch_id":`...)
	dst = appendJSONString(dst, b.BranchId)
	if b.Parent != nil {
		dst = append(dst, `,"parent":`...)
		dst = appendJSONString(dst, *b.Parent)
	}
	dst = append(dst, `,"role":`...)
	dst = appendJSONString(dst, b.Role)
	if b.Source != nil {
		dst = append(dst, `,"source":`...)
		dst = appendJSONString(dst, *b.Source)
	}
	dst = append(dst, `,"state":`...)
	dst = appendJSONString(dst, string(b.State))
	return append(dst, '}')
}

func appendDone(dst []byte, b gen.DoneBody) []byte {
	dst = append(dst, `{"elapsed_ms":`...)
	dst = strconv.AppendInt(dst, b.ElapsedMs, 10)
	dst = append(dst, `,"input_tokens":`...)
	dst = strconv.AppendInt(dst, b.InputTokens, 10)
	dst = append(dst, `,"model_calls":`...)
	dst = strconv.AppendInt(dst, b.ModelCalls, 10)
	dst = append(dst, `,"outcome":`...)
	dst = appendJSONString(dst, string(b.Outcome))
	dst = append(dst, `,"output_tokens":`...)
	dst = strconv.AppendInt(dst, b.OutputTokens, 10)
	dst = append(dst, `,"steps":`...)
	dst = strconv.AppendInt(dst, b.Steps, 10)
	return append(dst, '}')
}

func appendError(dst []byte, b gen.ErrorBody) []byte {
	dst = append(dst, `{"kind":`...)
	dst = appendJSONString(dst, string(b.Kind))
	dst = append(dst, `,"message":`...)
	dst = appendJSONString(dst, b.Message)
	return append(dst, '}')
}

// appendTicket appends the 202's body, json.Marshal's bytes for t (and its error, for a
// creation time time.Time's MarshalJSON refuses, which the service never makes).
func appendTicket(dst []byte, t gen.Ticket) ([]byte, error) {
	dst = append(dst, `{"cancel_url":`...)
	dst = appendJSONString(dst, t.CancelUrl)
	dst = append(dst, `,"conversation_id":`...)
	dst = appendJSONString(dst, t.ConversationId)
	dst = append(dst, `,"created_at":"`...)
	dst, err := t.CreatedAt.AppendText(dst) // MarshalJSON's text, and its errors, unquoted
	if err != nil {
		return nil, err
	}
	dst = append(dst, `","events_url":`...)
	dst = appendJSONString(dst, t.EventsUrl)
	dst = append(dst, `,"status_url":`...)
	dst = appendJSONString(dst, t.StatusUrl)
	dst = append(dst, `,"ticket":`...)
	dst = appendJSONString(dst, t.Ticket)
	return append(dst, '}'), nil
}
