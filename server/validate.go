package server

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
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
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			route := routes[echoRoute{c.Request().Method, c.Path()}]
			if route == nil {
				return fallback(next)(c)
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
	return badRequest("the request does not satisfy the API description", violations...)
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
		return where + ptr + ": " + se.Reason
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
