//go:build !fuzzsmoke

package server_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/das-ask/ask/deploy/nginx/nginxtest"
)

// TestContractThroughGateway sends TestContract's requests through the reference gateway
// (deploy/nginx/ask.conf) and holds every response to the document in the same way, but for
// the one exception the document gives a gateway: a header block too large for it, which nginx
// answers with its own 400 HTML page. Requests with a declared length their body does not
// have are left out (nginx waits for the rest), and so are paths outside the mount point,
// which are the gateway's, not the service's.
func TestContractThroughGateway(t *testing.T) {
	c := newConformer(t)
	c.gateway = nginxtest.Start(t, c.ts.Listener.Addr().String())
	var ps []probe
	for _, p := range c.probes() {
		if slices.Contains(p.hdr, "Content-Length") || !strings.HasPrefix(p.target, "/ask/") {
			continue
		}
		ps = append(ps, p)
	}
	c.run(ps)
}
