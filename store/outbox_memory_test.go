package store_test

import (
	"testing"

	"github.com/das-ask/ask/store"
	"github.com/das-ask/ask/store/storetest"
)

func TestMemoryOutbox(t *testing.T) { storetest.Outbox(t, store.NewMemoryOutbox()) }
