// Package source is the run's side of the MCP sources: one client session per source per run,
// authenticated as the caller, with tools discovered from the server (never listed by hand) and
// every call classified mechanically as a result, a tool error, a refusal or a transport failure.
package source

import (
	"errors"
	"fmt"
	"strings"

	"github.com/das-ask/ask/internal/httpurl"
	"github.com/das-ask/ask/internal/redact"
)

// Config names one source: Name is how steps, milestones and provenance refer to it; URL is its
// MCP streamable HTTP endpoint.
type Config struct {
	Name string
	URL  string
}

// ParseList parses DAS_SOURCES: comma-separated name=URL pairs. Names must be unique and made
// of letters, digits, '-' and '_' (they may appear in tool names shown to the model); URLs must
// be absolute http(s) URLs.
func ParseList(s string) ([]Config, error) {
	var out []Config
	seen := map[string]bool{}
	// An entry that is not name=URL with a valid name is named by its place in the list, not
	// quoted: it may be a URL with a password in it (demo:http://u:pw@h, or no name at all),
	// which redact.URL cannot always find where no scheme begins the entry.
	i := 0
	for item := range strings.SplitSeq(s, ",") {
		i++
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, raw, ok := strings.Cut(item, "=")
		name, raw = strings.TrimSpace(name), strings.TrimSpace(raw)
		if !ok || name == "" || raw == "" {
			return nil, fmt.Errorf("source %d of the list: want name=URL", i)
		}
		if !validName(name) {
			return nil, fmt.Errorf("source %d of the list: a name may hold only letters, digits, '-' and '_'", i)
		}
		if seen[name] {
			return nil, fmt.Errorf("source %q: named twice", name)
		}
		if _, err := httpurl.Parse(raw); err != nil {
			return nil, fmt.Errorf("source %q: %q is not an absolute http(s) URL", name, redact.URL(raw))
		}
		seen[name] = true
		out = append(out, Config{Name: name, URL: raw})
	}
	if len(out) == 0 {
		return nil, errors.New("no sources: want name=URL[,name=URL...]")
	}
	return out, nil
}

func validName(s string) bool {
	for _, r := range s {
		ok := r == '-' || r == '_' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')
		if !ok {
			return false
		}
	}
	return s != ""
}
