package store

// MemoryHeld is what a Memory holds: its maps' entries, the expiries queued and the
// idempotency records with their purge order. Everything is 0 for a store whose contents have
// all expired.
type MemoryHeld struct {
	Convs, Tickets, InFlight, ConvsOf, HeldOf, Queued, Idems, IdemOrder int
}

// Held is m's MemoryHeld.
func Held(m *Memory) MemoryHeld {
	m.mu.Lock()
	h := MemoryHeld{Convs: len(m.convs), Tickets: len(m.tickets), InFlight: len(m.inFlight),
		ConvsOf: len(m.convsOf), HeldOf: len(m.heldOf)}
	for i, b := range m.expiries.blocks {
		h.Queued += len(b)
		if i == 0 {
			h.Queued -= m.expiries.head
		}
	}
	m.mu.Unlock()
	m.idems.mu.Lock()
	h.Idems, h.IdemOrder = len(m.idems.recs), len(m.idems.order)
	m.idems.mu.Unlock()
	return h
}

// MaxDueScan is maxDueScan.
const MaxDueScan = maxDueScan
