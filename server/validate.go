package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/labstack/echo/v4"
	echomiddleware "github.com/oapi-codegen/echo-middleware"

	"github.com/das-ask/ask/gen"
)

// validator checks every request against the embedded contract (gen.GetSpec) served at the
// configured base path, before any handler code runs. Violations are 400 problem+json (415 for
// a body that is not JSON) whose text names what was broken, never the value that broke it:
// a value could be the question.
func (s *Server) validator() (echo.MiddlewareFunc, error) {
	spec, err := gen.GetSpec()
	if err != nil {
		return nil, fmt.Errorf("server: loading the embedded spec: %w", err)
	}
	base := s.opts.BasePath
	if base == "" {
		base = "/"
	}
	spec.Servers = openapi3.Servers{{URL: base}}
	// Authentication has already run (its own middleware, before admission): the spec's
	// security requirements are not checked a second time here. Dropping them from this copy
	// of the document also spares the validator the body read kin-openapi does for an
	// authentication function that might want it.
	spec.Security = nil
	for _, item := range spec.Paths.Map() {
		for _, op := range item.Operations() {
			op.Security = nil
		}
	}
	opts := &echomiddleware.Options{
		SilenceServersWarning: true,
		Options: openapi3filter.Options{
			AuthenticationFunc: openapi3filter.NoopAuthenticationFunc,
			MultiError:         true,
		},
		MultiErrorHandler: func(me openapi3.MultiError) *echo.HTTPError {
			return &echo.HTTPError{Code: http.StatusBadRequest, Internal: me}
		},
		ErrorHandler: func(_ echo.Context, he *echo.HTTPError) error {
			return validationProblem(he)
		},
	}
	// Every operation is registered on Echo with the validator as its own middleware, so Echo
	// has already found the operation: the validator takes its route from Echo's match
	// (method and route template) instead of matching the path again through a second router.
	// The generic router stays for anything the table does not hold.
	routes, err := echoRoutes(spec, s.opts.BasePath)
	if err != nil {
		return nil, err
	}
	fallback := echomiddleware.OapiRequestValidatorWithOptions(spec, opts)
	// Echo applies a route's middleware to every request anew: what can be built once is built
	// here, and the generic router's chain only when a request needs it.
	fast := map[*routers.Route]func(echo.Context) bool{}
	for _, r := range routes {
		if valid := fastValid[echoRoute{r.Method, r.Path}]; valid != nil {
			fast[r] = valid
		}
	}
	single := map[*routers.Route][]singleParam{}
	for _, r := range routes {
		if ps := singleParams(r); len(ps) > 0 {
			single[r] = ps
		}
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			method := c.Request().Method
			if method == http.MethodHead {
				method = http.MethodGet // a HEAD is validated as its GET (head.go)
			}
			route := routes[echoRoute{method, c.Path()}]
			if route == nil {
				return fallback(next)(c)
			}
			combineLists(c.Request().Header)
			if err := malformedQuery(c, single[route]); err != nil {
				return err
			}
			if err := repeated(c, single[route]); err != nil {
				return err
			}
			// An operation with a narrow check of its own (validate_fast.go) skips kin-openapi
			// for a request that check passes; it passes only requests the contract admits.
			if valid := fast[route]; valid != nil && valid(c) {
				return next(c)
			}
			if he := echomiddleware.ValidateRequestFromContext(c, matched{route, c}, opts); he != nil {
				return opts.ErrorHandler(c, he)
			}
			return next(c)
		}
	}, nil
}

// matched is the router ValidateRequestFromContext asks for the route: the one Echo matched,
// with Echo's path parameters.
type matched struct {
	route *routers.Route
	c     echo.Context
}

func (m matched) FindRoute(*http.Request) (*routers.Route, map[string]string, error) {
	names, values := m.c.ParamNames(), m.c.ParamValues()
	params := make(map[string]string, len(names))
	for i, n := range names {
		if i < len(values) {
			params[n] = values[i]
		}
	}
	return m.route, params, nil
}

// echoRoutes indexes the contract's operations by method and Echo route template (the base
// path, then the OpenAPI path with {name} written :name), as gen registers them.
func echoRoutes(spec *openapi3.T, basePath string) (map[echoRoute]*routers.Route, error) {
	routes := map[echoRoute]*routers.Route{}
	for path, item := range spec.Paths.Map() {
		tmpl := basePath + pathParam.ReplaceAllString(path, ":$1")
		for method, op := range item.Operations() {
			k := echoRoute{method, tmpl}
			if _, dup := routes[k]; dup {
				return nil, fmt.Errorf("server: two operations at %s %s", k.method, k.template)
			}
			routes[k] = &routers.Route{Spec: spec, Server: spec.Servers[0], Path: path, PathItem: item, Method: method, Operation: op}
		}
	}
	return routes, nil
}

var pathParam = regexp.MustCompile(`\{([^}/]+)\}`)

// echoRoute is a method and a path template: Echo's (":name") as the validator's table keys
// routes, or the contract's ("{name}") as fastValid does.
type echoRoute struct{ method, template string }

// singleParam is a query or header parameter that takes one value; key is how the request
// holds it (a header's canonical name).
type singleParam struct{ in, name, key string }

// singleParams are route's query and header parameters that are not arrays.
func singleParams(route *routers.Route) []singleParam {
	var out []singleParam
	params := append(openapi3.Parameters{}, route.PathItem.Parameters...)
	for _, p := range append(params, route.Operation.Parameters...) {
		v := p.Value
		if v == nil || v.Schema == nil || v.Schema.Value == nil || v.Schema.Value.Type.Is(openapi3.TypeArray) {
			continue
		}
		switch {
		case v.In == openapi3.ParameterInQuery:
			out = append(out, singleParam{v.In, v.Name, v.Name})
		case v.In == openapi3.ParameterInHeader && !listField[http.CanonicalHeaderKey(v.Name)]:
			out = append(out, singleParam{v.In, v.Name, http.CanonicalHeaderKey(v.Name)})
		}
	}
	return out
}

// listField holds the header parameters whose fields are lists (RFC 7240's Prefer): several
// lines of one are not a repetition but one list, so they are not single parameters.
var listField = map[string]bool{"Prefer": true}

// combineLists makes the lines of each list-valued header field one line, in order (RFC 9110
// §5.3 lets a recipient), as the contract's string parameter and the generated binding read it.
func combineLists(h http.Header) {
	for k := range listField {
		if len(h[k]) > 1 {
			h[k] = []string{strings.Join(h[k], ", ")}
		}
	}
}

// repeated is the 400 for a request that gives a one-valued parameter more than once, naming
// each: kin-openapi reads the first value only, and the generated wrapper would refuse the
// request with a problem that names nothing.
func repeated(c echo.Context, params []singleParam) error {
	var violations []string
	for _, p := range params {
		var n int
		if p.in == openapi3.ParameterInQuery {
			n = len(c.QueryParams()[p.key])
		} else {
			n = len(c.Request().Header[p.key])
		}
		if n > 1 {
			violations = append(violations, fmt.Sprintf("parameter %q in %s: must be given once, not repeated", p.name, p.in))
		}
	}
	if violations == nil {
		return nil
	}
	return badRequest("the request does not satisfy the API description", violations...)
}

// malformedQuery is the 400 for a query Go's parser would drop pairs of, on an operation that
// reads its query: a pair holding a ';' (golang.org/issue/25192) or a malformed
// percent-escape (`%zz`, a trailing `%`), or one with more parameters than it reads (it then
// reads none). `?after=3;x=1` and `?after=12%` were read as no
// cursor at all and replayed the stream from seq 1 (the second until 2026-12-07), and
// `?after=5&after=%zz` as one cursor; a value is one the client meant, or a 400, never nothing.
// maxQueryParams is net/url's bound on a query's parameters (Go 1.26: 10,000).
const maxQueryParams = 10000

func malformedQuery(c echo.Context, params []singleParam) error {
	raw := c.Request().URL.RawQuery
	if raw == "" || !slices.ContainsFunc(params, func(p singleParam) bool { return p.in == openapi3.ParameterInQuery }) {
		return nil
	}
	if strings.Contains(raw, ";") {
		return badRequest("the request does not satisfy the API description",
			`query: a ";" separates nothing; parameters are separated by "&" (in a value, write it %3B)`)
	}
	if _, err := url.ParseQuery(raw); err != nil {
		if errors.As(err, new(url.EscapeError)) {
			return badRequest("the request does not satisfy the API description",
				`query: a "%" that does not begin an escape of two hex digits (in a value, write it %25)`)
		}
		if strings.Count(raw, "&")+1 > maxQueryParams {
			// Past Go's bound on a query's parameters, it reads none of them.
			return badRequest("the request does not satisfy the API description", "query: too many parameters")
		}
		return badRequest("the request does not satisfy the API description", "query: does not parse")
	}
	return nil
}

// validationProblem turns a validator error into a problem without echoing request values.
func validationProblem(he *echo.HTTPError) error {
	if he.Code == http.StatusNotFound {
		return errNotFound
	}
	if he.Code != http.StatusBadRequest {
		return notValidated(he.Code)
	}
	var errs []error
	var me openapi3.MultiError
	if errors.As(he.Internal, &me) {
		errs = flatten(me)
	} else if he.Internal != nil {
		errs = []error{he.Internal}
	}
	var violations []string
	for _, err := range errs {
		var re *openapi3filter.RequestError
		if errors.As(err, &re) && re.RequestBody != nil && strings.HasPrefix(re.Reason, "header Content-Type has unexpected value") {
			return unsupportedMedia()
		}
		violations = append(violations, describeViolation(err)...)
	}
	return badRequest("the request does not satisfy the API description", listedViolations(violations)...)
}

// maxListedViolations is how many violations a 400 lists. The validator reports every one
// (every unknown member of an object among them), so without a bound a body of short unknown
// names (`"a":0,`, 6 bytes each) came back as a problem about six times its size: 251 KB of
// errors for a 59 KB body, a hundred megabytes at the largest DAS_ASK_MAX_BODY_BYTES.
const maxListedViolations = 10

// listedViolations is vs cut to maxListedViolations, the last entry saying how many more were
// found and left out.
func listedViolations(vs []string) []string {
	if len(vs) <= maxListedViolations {
		return vs
	}
	more := len(vs) - (maxListedViolations - 1)
	return append(vs[:maxListedViolations-1:maxListedViolations-1], strconv.Itoa(more)+" more violations not listed")
}

func flatten(me openapi3.MultiError) []error {
	var out []error
	for _, err := range me {
		// Only a MultiError itself is opened here: a RequestError that wraps one keeps its
		// context (which parameter, or the body) for describeViolation.
		if inner, ok := err.(openapi3.MultiError); ok {
			out = append(out, flatten(inner)...)
			continue
		}
		out = append(out, err)
	}
	return out
}

// describeViolation says where and how a request broke the spec: a JSON pointer or parameter
// name and the schema's reason, which names rules, not values.
func describeViolation(err error) []string {
	var re *openapi3filter.RequestError
	where := "request"
	if errors.As(err, &re) {
		switch {
		case re.Parameter != nil:
			where = fmt.Sprintf("parameter %q in %s", re.Parameter.Name, re.Parameter.In)
		case re.RequestBody != nil:
			where = "body"
		}
		var me openapi3.MultiError
		if errors.As(re.Err, &me) {
			var out []string
			for _, e := range flatten(me) {
				out = append(out, schemaViolation(where, e))
			}
			return out
		}
		if re.Err != nil {
			return []string{schemaViolation(where, re.Err)}
		}
		if re.Reason != "" && re.Parameter == nil {
			return []string{where + ": " + re.Reason}
		}
		return []string{where + ": invalid"}
	}
	return []string{schemaViolation(where, err)}
}

func schemaViolation(where string, err error) string {
	var se *openapi3.SchemaError
	if errors.As(err, &se) {
		ptr := "/" + strings.Join(se.JSONPointer(), "/")
		if ptr == "/" {
			ptr = ""
		}
		return where + ptr + ": " + schemaReason(se)
	}
	switch {
	case errors.Is(err, openapi3filter.ErrInvalidRequired):
		return where + ": required"
	case errors.Is(err, openapi3filter.ErrInvalidEmptyValue):
		return where + ": must not be empty"
	}
	var pe *openapi3filter.ParseError
	if errors.As(err, &pe) {
		return where + ": not well-formed"
	}
	return where + ": invalid"
}

// schemaReason is kin-openapi's reason for se, which names the rule broken and never the value,
// except where it speaks of Go instead: a number too large for a float64 ("cannot convert
// json.Number to float64") and a null ("Value is not nullable") are worded as kin-openapi
// words any other value of the wrong type ("value must be a string"); a number where the
// schema wants one is "out of range".
func schemaReason(se *openapi3.SchemaError) string {
	if se.SchemaField == "properties" {
		return unsupportedProperty(se.Reason)
	}
	if se.SchemaField != "type" && se.SchemaField != "nullable" || strings.HasPrefix(se.Reason, "value must be ") {
		return se.Reason
	}
	var types []string
	if se.Schema != nil && se.Schema.Type != nil {
		types = se.Schema.Type.Slice()
	}
	_, number := se.Value.(json.Number)
	switch {
	case number && len(types) > 0 && (slices.Contains(types, openapi3.TypeNumber) || slices.Contains(types, openapi3.TypeInteger)):
		return "number is out of range"
	case len(types) == 1:
		a := "a"
		switch types[0] {
		case openapi3.TypeArray, openapi3.TypeObject, openapi3.TypeInteger:
			a = "an"
		}
		return "value must be " + a + " " + types[0]
	case len(types) > 1:
		return "value must be one of " + strings.Join(types, ", ")
	case se.SchemaField == "nullable":
		return "value must not be null"
	}
	return "value is not valid here"
}

// maxEchoedName is how much of an unknown property's name a 400 repeats: enough to find it in
// the request, not the whole of a name as long as the body.
const maxEchoedName = 64

// unsupportedProperty is kin-openapi's `property "name" is unsupported` with the name cut to
// maxEchoedName characters (and "…" said where it was cut); any other reason as it is.
func unsupportedProperty(reason string) string {
	const head, tail = "property ", " is unsupported"
	quoted, okHead := strings.CutPrefix(reason, head)
	quoted, okTail := strings.CutSuffix(quoted, tail)
	if !okHead || !okTail {
		return reason
	}
	name, err := strconv.Unquote(quoted)
	if err != nil {
		return reason
	}
	if r := []rune(name); len(r) > maxEchoedName {
		return head + strconv.Quote(string(r[:maxEchoedName])) + "… (cut at " + strconv.Itoa(maxEchoedName) + " characters)" + tail
	}
	return reason
}
