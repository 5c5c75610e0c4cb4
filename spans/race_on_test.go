//go:build race

package spans_test

// raceEnabled: the race detector instruments the code and allocates on its own account
// (fmt's error paths among others), so allocation counts are not the code's under it.
const raceEnabled = true
