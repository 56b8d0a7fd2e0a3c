// Package hardening holds black-box tests of the whole system under hostile input, hostile
// tokens, faults and load: the dev stack (package demo/stack) started in process, or assembled
// by hand from its pieces where a test needs a fault in between, and driven over real loopback
// HTTP as any client would. It has no code of its own; `go test ./hardening/` runs it, and
// `-short` scales the load test down.
//
// What each file proves:
//
//	tokens_test.go     hostile bearers end in 401 and create nothing; JWKS down and key rotation
//	ownership_test.go  other identities and tenants get the same 404 as a made-up id; ids are unguessable
//	faults_test.go     source and model failures, and a token expiring mid-run, end in one terminal and done
//	edge_test.go       disconnects, a reader that never reads, many readers and reconnect storms
//	load_test.go       thousands of asks with cancels and disconnects; no ticket lost, no goroutine left
//	privacy_test.go    no question text and no token in any log line, problem body or error event
package hardening
