package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
)

// contract is the schema the target publishes, loaded and resolved.
type contract struct {
	doc   *openapi3.T
	event *openapi3.Schema
}

// loadContract fetches {base}/v1/openapi.yaml without a bearer (the schema is public) and loads it.
func (s *session) loadContract(ctx context.Context) (*contract, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.cfg.BaseURL+"/v1/openapi.yaml", nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET /v1/openapi.yaml: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, fmt.Errorf("GET /v1/openapi.yaml: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /v1/openapi.yaml without a bearer: status %d, want 200", resp.StatusCode)
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(body)
	if err != nil {
		return nil, fmt.Errorf("load the published schema: %w", err)
	}
	if err := doc.Validate(ctx); err != nil {
		return nil, fmt.Errorf("the published schema is not valid OpenAPI: %w", err)
	}
	ref := doc.Components.Schemas["Event"]
	if ref == nil || ref.Value == nil {
		return nil, errors.New("the published schema has no components.schemas.Event")
	}
	return &contract{doc: doc, event: ref.Value}, nil
}

// validateEvent validates an event's data against the published Event schema.
func (c *contract) validateEvent(e event) error {
	var v any
	if err := json.Unmarshal(e.Raw, &v); err != nil {
		return errors.New("data is not JSON")
	}
	return c.event.VisitJSON(v, openapi3.MultiErrors(), openapi3.EnableFormatValidation())
}

// operations maps a method and a path relative to the base URL to the contract's path template.
var operations = []struct {
	method   string
	pattern  *regexp.Regexp
	template string
}{
	{http.MethodPost, regexp.MustCompile(`^/v1/conversations$`), "/v1/conversations"},
	{http.MethodPost, regexp.MustCompile(`^/v1/conversations/[^/]+/asks$`), "/v1/conversations/{conversation_id}/asks"},
	{http.MethodGet, regexp.MustCompile(`^/v1/asks/[^/]+/events$`), "/v1/asks/{ticket}/events"},
	{http.MethodGet, regexp.MustCompile(`^/v1/asks/[^/]+$`), "/v1/asks/{ticket}"},
	{http.MethodPost, regexp.MustCompile(`^/v1/asks/[^/]+/cancel$`), "/v1/asks/{ticket}/cancel"},
}

// validateExchange validates a recorded response against the operation it answered: its
// status must be documented and its body must match the documented schema.
func (c *contract) validateExchange(ctx context.Context, x exchange) error {
	var template string
	for _, op := range operations {
		if op.method == x.Method && op.pattern.MatchString(x.Path) {
			template = op.template
			break
		}
	}
	if template == "" {
		return nil
	}
	item := c.doc.Paths.Find(template)
	if item == nil || item.GetOperation(x.Method) == nil {
		return fmt.Errorf("the published schema has no %s %s", x.Method, template)
	}
	req, err := http.NewRequestWithContext(ctx, x.Method, "http://target"+x.Path, nil)
	if err != nil {
		return err
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: req,
			Route:   &routers.Route{Spec: c.doc, Path: template, PathItem: item, Method: x.Method, Operation: item.GetOperation(x.Method)},
		},
		Status:  x.Status,
		Header:  x.Header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	in.SetBodyBytes(x.Body)
	if err := openapi3filter.ValidateResponse(ctx, in); err != nil {
		return errors.New(oneLine(err.Error()))
	}
	return nil
}

// oneLine folds a multi-line validation message into one line of bounded length.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
