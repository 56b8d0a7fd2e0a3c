//go:build !race

package hardening_test

// raceEnabled scales the load test down: the race detector makes every ask several times slower.
const raceEnabled = false
