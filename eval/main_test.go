package eval_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/das-ask/ask/internal/leaktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, leaktest.IgnoreTestServers()...) }
