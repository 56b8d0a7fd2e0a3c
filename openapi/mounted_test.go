package openapi_test

import (
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/das-ask/ask/openapi"
)

// TestMountedServerSaysWhereItIs: the document a service mounted elsewhere publishes names that
// mount as its server, and says nothing there that is true only of the default. It used to
// call /x/y "The default mount point", since Mounted changes only the url.
func TestMountedServerSaysWhereItIs(t *testing.T) {
	for _, base := range []string{"/ask", "/x/y", ""} {
		doc, err := openapi3.NewLoader().LoadFromData(openapi.Mounted(base))
		if err != nil {
			t.Fatal(err)
		}
		want := base
		if want == "" {
			want = "/"
		}
		if len(doc.Servers) != 1 || doc.Servers[0].URL != want {
			t.Fatalf("mounted at %q: servers %+v, want one, %q", base, doc.Servers, want)
		}
		if d := doc.Servers[0].Description; base != "/ask" && strings.Contains(strings.ToLower(d), "default mount") {
			t.Errorf("mounted at %q, the server is described as %q", base, d)
		}
	}
}
