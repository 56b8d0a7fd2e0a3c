package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"sort"

	"go.yaml.in/yaml/v3"
)

// fetchPublic GETs a path of the service without a bearer and returns the body of a 200.
func (s *session) fetchPublic(ctx context.Context, path string) ([]byte, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.cfg.BaseURL+path, nil)
	if err != nil {
		return nil, "", err
	}
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, "", fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, "", fmt.Errorf("GET %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("GET %s without a bearer: status %d, want 200", path, resp.StatusCode)
	}
	return body, mediaType(resp.Header), nil
}

// checkJSONEqualsYAML: the contract says /v1/openapi.json is "this document as JSON", so parsed
// it must equal /v1/openapi.yaml parsed: every key and value, nothing added, nothing dropped.
func checkJSONEqualsYAML(ctx context.Context, s *session) verdict {
	y, _, err := s.fetchPublic(ctx, "/v1/openapi.yaml")
	if err != nil {
		return fail("the YAML document", err.Error())
	}
	j, mt, err := s.fetchPublic(ctx, "/v1/openapi.json")
	if err != nil {
		return fail("the JSON document", err.Error())
	}
	if mt != "application/json" {
		return fail("/v1/openapi.json as application/json", fmt.Sprintf("%q", mt))
	}
	var fromYAML, fromJSON any
	if err := yaml.Unmarshal(y, &fromYAML); err != nil {
		return fail("/v1/openapi.yaml to parse as YAML", oneLine(err.Error()))
	}
	if err := json.Unmarshal(j, &fromJSON); err != nil {
		return fail("/v1/openapi.json to parse as JSON", oneLine(err.Error()))
	}
	// Through JSON's value model (numbers as float64, maps with string keys) both ways.
	round, err := json.Marshal(fromYAML)
	if err != nil {
		return fail("the YAML document to be expressible as JSON", oneLine(err.Error()))
	}
	var want any
	if err := json.Unmarshal(round, &want); err != nil {
		return fail("the YAML document to be expressible as JSON", oneLine(err.Error()))
	}
	diffs := jsonDiff("", want, fromJSON, nil)
	sort.Strings(diffs)
	return problems("/v1/openapi.json parsed to equal /v1/openapi.yaml parsed", diffs,
		fmt.Sprintf("the JSON (%d bytes) and the YAML (%d bytes) are the same document", len(j), len(y)))
}

// jsonDiff lists where got differs from want, as JSON pointers, at most a few dozen.
func jsonDiff(at string, want, got any, out []string) []string {
	if len(out) > 50 {
		return out
	}
	wm, wok := want.(map[string]any)
	gm, gok := got.(map[string]any)
	if wok && gok {
		for k, wv := range wm {
			gv, ok := gm[k]
			if !ok {
				out = append(out, at+"/"+k+" is missing from the JSON")
				continue
			}
			out = jsonDiff(at+"/"+k, wv, gv, out)
		}
		for k := range gm {
			if _, ok := wm[k]; !ok {
				out = append(out, at+"/"+k+" is in the JSON only")
			}
		}
		return out
	}
	wa, wok := want.([]any)
	ga, gok := got.([]any)
	if wok && gok && len(wa) == len(ga) {
		for i := range wa {
			out = jsonDiff(fmt.Sprintf("%s/%d", at, i), wa[i], ga[i], out)
		}
		return out
	}
	if !reflect.DeepEqual(want, got) {
		out = append(out, fmt.Sprintf("%s differs (%s in the YAML, %s in the JSON)", or(at, "/"), short(want), short(got)))
	}
	return out
}

// short prints a value in at most a few dozen characters.
func short(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 40 {
		return string(b[:40]) + "…"
	}
	return string(b)
}
