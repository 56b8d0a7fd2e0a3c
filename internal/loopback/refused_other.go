//go:build !unix

package loopback

// Refused returns a loopback address where nothing listens. Off unix it is a pick of Addr's,
// closed: a listener started meanwhile elsewhere may still be given its port (on unix the port
// is held by a socket that never listens).
func Refused(tb TB) string {
	tb.Helper()
	a, err := Addr()
	if err != nil {
		tb.Fatalf("loopback: %v", err)
	}
	return a
}
