//go:build race

package engine_test

// raceEnabled: the race detector makes every memory access several times dearer. The tests that
// weigh a cost by analyzing very wide traces take minutes under it and find no race the other
// tests miss (one goroutine analyzes), so they skip under it; make test runs them plainly.
const raceEnabled = true
