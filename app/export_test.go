package app

import "github.com/das-ask/ask/store"

// StoreOf is the store m's Run built (or was given), kept after Close.
func StoreOf(m *Main) store.Store { return m.st }
