package idp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// RequestToken asks the IdP at baseURL (its issuer URL, e.g. http://127.0.0.1:8090) to mint a
// token for req and returns it. A nil client means http.DefaultClient. The error carries the
// IdP's OAuth error and description, never a token.
func RequestToken(ctx context.Context, client *http.Client, baseURL string, req TokenRequest) (string, error) {
	if client == nil {
		client = http.DefaultClient
	}
	body, err := json.Marshal(req)
	if err != nil {
		return "", err
	}
	u := strings.TrimRight(baseURL, "/") + tokenPath
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return "", fmt.Errorf("idp: %w", err)
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(hr)
	if err != nil {
		return "", fmt.Errorf("idp: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", fmt.Errorf("idp: reading the response of %s: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error       string `json:"error"`
			Description string `json:"error_description"`
		}
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			return "", fmt.Errorf("idp: %s: %s: %s", resp.Status, e.Error, e.Description)
		}
		return "", fmt.Errorf("idp: POST %s: %s", u, resp.Status)
	}
	var tr TokenResponse
	if err := json.Unmarshal(b, &tr); err != nil || tr.AccessToken == "" {
		return "", fmt.Errorf("idp: POST %s: the response holds no access_token", u)
	}
	return tr.AccessToken, nil
}
