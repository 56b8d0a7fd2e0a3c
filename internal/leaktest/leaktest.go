// Package leaktest names the goroutines a goroutine-leak check (go.uber.org/goleak) must not
// count against packages whose tests run the demo servers in process.
package leaktest

import "go.uber.org/goleak"

// IgnoreTestServers ignores what belongs to the tests' servers, not to the package under test:
// idle keep-alive connections of the shared HTTP transport, and a demo source's server-side MCP
// sessions (a session whose bearer was revoked cannot be deleted by its client, so the server
// keeps it until the server closes).
//
//	func TestMain(m *testing.M) { goleak.VerifyTestMain(m, leaktest.IgnoreTestServers()...) }
func IgnoreTestServers() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreTopFunction("github.com/modelcontextprotocol/go-sdk/mcp.(*streamableServerConn).Read"),
	}
}
