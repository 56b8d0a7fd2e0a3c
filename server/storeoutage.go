package server

import (
	"time"

	"github.com/das-ask/ask/internal/logthrottle"
)

// storeOutageLogEvery is how often, at most, a store outage logs another
// "store unavailable: request answered 503" line after its first.
const storeOutageLogEvery = 10 * time.Second

// newStoreOutage is the gate that keeps the log of a store outage bounded (Server.outage): the
// first request the store could not serve is a warn line at once (errorHandler), then at most
// one every storeOutageLogEvery, which counts the 503s answered since the line before it
// (suppressed), however many requests arrive; the first request the store serves again
// (storeServed) ends the outage with an info line, so the log says when it ended, how many
// requests it cost (answered_503) and how long it lasted (unavailable_ms). One line per 503
// flooded the log at the request rate for as long as Redis was away, while saying nothing when
// it came back. The gate's OK is called on every request the store serves and costs an atomic
// load while the store answers.
func newStoreOutage() *logthrottle.Gate {
	return &logthrottle.Gate{Every: storeOutageLogEvery, CountKey: "answered_503", DurationKey: "unavailable_ms"}
}
