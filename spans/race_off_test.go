//go:build !race

package spans_test

// raceEnabled: see race_on_test.go.
const raceEnabled = false
