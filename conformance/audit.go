package conformance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// auditLine is one line of a source's audit log.
type auditLine struct {
	TS      time.Time `json:"ts"`
	CallID  string    `json:"call_id"`
	OID     string    `json:"oid"`
	Tool    string    `json:"tool"`
	Ms      int64     `json:"ms"`
	Refused bool      `json:"refused"`
	Status  string    `json:"status"`
}

// audit returns the audit lines for one call_id, from every source's audit root:
// GET {root}/audit?call_id=..., answered with a JSON array or JSON lines.
func (s *session) audit(ctx context.Context, callID string) ([]auditLine, error) {
	return s.auditWhere(ctx, append([]string{s.cfg.AuditURL}, s.cfg.AuditURLs...), "call_id", callID,
		func(l auditLine) bool { return l.CallID == callID })
}

// auditWhere returns the audit lines at each of roots that the query key=value asks for,
// filtered here by match as well, in case a source ignores the filter.
func (s *session) auditWhere(ctx context.Context, roots []string, key, value string, match func(auditLine) bool) ([]auditLine, error) {
	var mine []auditLine
	for _, root := range roots {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, root+"/audit?"+key+"="+url.QueryEscape(value), nil)
		if err != nil {
			return nil, err
		}
		lines, err := s.readAudit(req)
		if err != nil {
			return nil, err
		}
		for _, l := range lines {
			if match(l) {
				mine = append(mine, l)
			}
		}
	}
	return mine, nil
}

// readAudit makes one audit request, answered with a JSON array or JSON lines.
func (s *session) readAudit(req *http.Request) ([]auditLine, error) {
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("audit: status %d", resp.StatusCode)
	}
	var lines []auditLine
	if b := bytes.TrimSpace(body); len(b) > 0 && b[0] == '[' {
		if err := json.Unmarshal(b, &lines); err != nil {
			return nil, fmt.Errorf("audit: %w", err)
		}
	} else {
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(make([]byte, 64<<10), maxLine)
		for sc.Scan() {
			if len(bytes.TrimSpace(sc.Bytes())) == 0 {
				continue
			}
			var l auditLine
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				return nil, fmt.Errorf("audit: %w", err)
			}
			lines = append(lines, l)
		}
	}
	return lines, nil
}
