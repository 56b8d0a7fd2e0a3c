package stack

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/das-ask/ask/auth"
	"github.com/das-ask/ask/demo/source"
)

// startCatalog starts the catalog source of a split demo: the glossary only, on its own
// listener, with its own validator and its own audit log (StateDir/demo-catalog/audit.jsonl).
func (s *Stack) startCatalog(ctx context.Context, opts Options, newValidator func(string) (*auth.Validator, error)) error {
	ln, err := listen(opts.CatalogAddr)
	if err != nil {
		return fmt.Errorf("demo catalog: %w", err)
	}
	v, err := newValidator("catalog")
	if err != nil {
		ln.Close()
		return fmt.Errorf("demo catalog auth: %w", err)
	}
	auditPath := ""
	if opts.StateDir != "" {
		auditPath = filepath.Join(opts.StateDir, "demo-catalog", "audit.jsonl")
	}
	if s.catalog, err = source.New(ctx, source.Options{Authenticator: v, AuditPath: auditPath, Logger: s.log.With("component", "catalog"), Serves: source.PartCatalog}); err != nil {
		ln.Close()
		return fmt.Errorf("demo catalog: %w", err)
	}
	s.catalogAuth = v
	s.CatalogURL = "http://" + ln.Addr().String()
	s.serve("catalog", ln, s.catalog.Handler())
	return nil
}
