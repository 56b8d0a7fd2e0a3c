package server

import (
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/das-ask/ask/gen"
)

// Every route gen registers is in the validator's table, under both base paths, so every
// operation is validated without a second router: a route missing from the table would still
// be validated (through the generic router), only slower, so this is what holds the fast path.
func TestValidatorRoutesCoverEveryOperation(t *testing.T) {
	for _, base := range []string{"", "/ask"} {
		spec, err := gen.GetSpec()
		if err != nil {
			t.Fatal(err)
		}
		routes, err := echoRoutes(spec, base)
		if err != nil {
			t.Fatal(err)
		}
		e := echo.New()
		gen.RegisterHandlersWithOptions(e, &handlers{}, gen.RegisterHandlersOptions{BaseURL: base})
		n := 0
		for _, r := range e.Routes() {
			n++
			rt := routes[echoRoute{r.Method, r.Path}]
			if rt == nil {
				t.Errorf("base %q: %s %s is not in the validator's table", base, r.Method, r.Path)
				continue
			}
			if rt.Operation.OperationID == "" {
				t.Errorf("base %q: %s %s has no operation", base, r.Method, r.Path)
			}
		}
		if n == 0 || n != len(routes) {
			t.Errorf("base %q: %d routes registered, %d in the table", base, n, len(routes))
		}
	}
}
