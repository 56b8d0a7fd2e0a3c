package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/das-ask/ask/agent/source"
)

// SourceOracle computes expected results through a source's run_query tool (the source tool
// contract, docs/sources.md), as one identity: for a set over a warehouse other than the demo
// dataset. The identity must be allowed to read what the set's SQL reads; a refusal, a tool
// error or a truncated result is an error, since a partial truth scores nothing.
type SourceOracle struct {
	// URL is the source's MCP endpoint (e.g. http://127.0.0.1:8091/mcp).
	URL string
	// Token is the bearer the oracle calls the source with.
	Token func(ctx context.Context) (string, error)
	// Timeout bounds one query, connection included: a source that does not answer is an
	// error that says so, not an eval that waits for ever. 0 means DefaultTruthTimeout.
	Timeout time.Duration
	// HTTPClient is the base client of the source sessions; nil means the source package's default.
	HTTPClient *http.Client
}

// DefaultTruthTimeout is SourceOracle.Timeout's default, the same as one ask's.
const DefaultTruthTimeout = 3 * time.Minute

var errTruthTimeout = errors.New("truth source timeout")

// Query implements Oracle. It opens one session per query: the oracle runs once per item,
// before any question is asked.
func (o *SourceOracle) Query(ctx context.Context, sql string) ([]string, [][]any, error) {
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = DefaultTruthTimeout
	}
	qctx, cancel := context.WithTimeoutCause(ctx, timeout, errTruthTimeout)
	defer cancel()
	cols, rows, err := o.query(qctx, sql)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(qctx), errTruthTimeout) {
		return nil, nil, fmt.Errorf("the truth source at %s did not answer within %s", RedactURL(o.URL), timeout)
	}
	return cols, rows, err
}

func (o *SourceOracle) query(ctx context.Context, sql string) ([]string, [][]any, error) {
	tok, err := o.Token(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("truth source: token: %w", err)
	}
	sess, err := source.Connect(ctx, source.Config{Name: "truth", URL: o.URL}, tok, source.Options{ClientName: "ask-eval", HTTPClient: o.HTTPClient})
	if err != nil {
		return nil, nil, fmt.Errorf("truth source: %w", err)
	}
	defer sess.Close()
	r := sess.Call(ctx, "run_query", map[string]any{"sql": sql})
	switch r.Outcome {
	case source.OK:
	case source.Refused:
		return nil, nil, fmt.Errorf("truth source refused the query (%s): %s", r.RefusalCode, r.RefusalReason)
	default:
		if r.Err != nil {
			return nil, nil, fmt.Errorf("truth source: %w", r.Err)
		}
		return nil, nil, fmt.Errorf("truth source: run_query failed: %s", r.Text)
	}
	var res struct {
		Columns   []string `json:"columns"`
		Rows      [][]any  `json:"rows"`
		Truncated bool     `json:"truncated"`
	}
	if err := json.Unmarshal(r.Data, &res); err != nil {
		return nil, nil, fmt.Errorf("truth source: run_query result: %w", err)
	}
	if res.Truncated {
		return nil, nil, fmt.Errorf("truth source: the result was truncated at %d rows", len(res.Rows))
	}
	return res.Columns, res.Rows, nil
}
