package webhook

import (
	"container/heap"
	"sync"
	"time"
)

// maxRetryTimes bounds the due times a deliverer keeps; past it, a retry is found by the Poll
// as another replica's is.
const maxRetryTimes = 4096

// retryTimes holds the due times of the retries this deliverer recorded, so that it wakes at a
// retry's own time rather than at the first Poll after it: backoff's jitter spreads the retries
// of many deliveries over its whole range, and waking only on Poll ticks gathered them again
// on the ticks (found by an audit: eight deliveries failing together were retried on two or
// three shared instants). A retry another replica recorded is still found by the Poll.
type retryTimes struct {
	mu sync.Mutex
	h  timeHeap
}

// add notes a retry due at t.
func (r *retryTimes) add(t time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.h) < maxRetryTimes {
		heap.Push(&r.h, t)
	}
}

// wait is how long to sleep from now before claiming again: until the earliest retry still
// ahead, at most poll. Due times already passed are dropped, and if any was, wait is 0: the
// claim that follows is the one made at (or after) its time.
func (r *retryTimes) wait(now time.Time, poll time.Duration) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	passed := false
	for len(r.h) > 0 && !r.h[0].After(now) {
		heap.Pop(&r.h)
		passed = true
	}
	if passed {
		return 0
	}
	if len(r.h) > 0 {
		return min(poll, r.h[0].Sub(now))
	}
	return poll
}

// timeHeap is a min-heap of times (container/heap).
type timeHeap []time.Time

func (h timeHeap) Len() int           { return len(h) }
func (h timeHeap) Less(i, j int) bool { return h[i].Before(h[j]) }
func (h timeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timeHeap) Push(x any)        { *h = append(*h, x.(time.Time)) }
func (h *timeHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	*h = old[:len(old)-1]
	return t
}
