package client

import (
	"fmt"

	"github.com/das-ask/ask/gen"
)

// StatusOutcome folds what Status returned into an Outcome, as Wait does a stream, so a caller
// that long-polls tells the four outcomes apart without comparing state strings or decoding
// gen.Event itself. While the run is running the Outcome's Kind is NotTerminal. Outcome.MissedSteps
// is always 0: it counts what a stream did not deliver, and Status delivers no steps. An error
// means the status's terminal event is not one of the four.
func StatusOutcome(st gen.AskStatus) (Outcome, error) {
	var out Outcome
	if st.Terminal == nil {
		return out, nil
	}
	v, err := st.Terminal.ValueByDiscriminator()
	if err != nil {
		return Outcome{}, fmt.Errorf("client: ticket %s: terminal event: %w", st.Ticket, err)
	}
	ev := Event{Value: v}
	if ev.Outcome() == NotTerminal {
		return Outcome{}, fmt.Errorf("client: ticket %s: terminal event is a %T, not an outcome", st.Ticket, v)
	}
	out.add(ev)
	if st.Done != nil {
		out.add(Event{Value: *st.Done})
	}
	return out, nil
}
