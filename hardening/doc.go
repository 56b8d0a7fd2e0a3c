// Package hardening holds black-box tests of the whole system under hostile input, hostile
// tokens, faults and load: the dev stack (package demo/stack) started in process, or assembled
// by hand from its pieces where a test needs a fault in between, and driven over real loopback
// HTTP as any client would. It has no code of its own; `go test ./hardening/` runs it, and
// `-short` scales the load test down.
//
// What each file proves:
//
//	tokens_test.go     hostile bearers end in 401 at the service and the source and create nothing
//	                   (a malformed Authorization, the Bearer scheme with no token, in 400);
//	                   key rotation survives garbage kids and a flood of them
//	jwks_test.go       the JWKS down at start (503 with Retry-After, nothing runs) and mid-run (cached
//	                   keys work)
//	ownership_test.go  other identities, other tenants and guessed ids get a made-up id's 404;
//	                   ids carry at least 128 random bits
//	faults_test.go     source and model failures, and a token expiring mid-run, end in one terminal
//	                   and done within the deadline, with the kind that names them
//	edge_test.go       disconnects, a reader that never reads, many readers and reconnect storms
//	load_test.go       thousands of asks with cancels and disconnects; no ticket lost, the heap back
//	                   to its baseline after the TTL, no goroutine left
//	privacy_test.go    no question text and no token in any log line, response or event but accepted
//	proxy_test.go      the fault-injecting reverse proxy the fault tests put in front of a source or model
//	main_test.go       goleak over the whole package
package hardening
