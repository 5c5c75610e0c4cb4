package main

import (
	"strings"
	"testing"
)

// `lab layers --attempts 4,4,4` is the 64 calls of docs/principles.md#intents-and-attempts, for one
// request, one variant only.
func TestLabLayersAttempts(t *testing.T) {
	code, out, stderr := runCLI(t, "", "lab", "layers", "--attempts", "4,4,4")
	want := "attempts 4 x 4 x 4                         dependency saw 64 calls for 1 request (64.00x; edge x4 > api x4 > adapter x4)"
	if code != 0 || !strings.Contains(out, want) || strings.Contains(out, "every layer retries") {
		t.Errorf("exit %d, want the one variant %q:\n%s\n%s", code, want, out, stderr)
	}
	code, out, _ = runCLI(t, "", "lab", "layers", "--requests", "40", "--budget", "0.1")
	if code != 0 || !strings.Contains(out, "attempts 3 x 3 x 3, 40 requests, budget 0.1 dependency saw 84 calls for 40 requests (2.10x; edge x3 > api x3 > adapter x3)  budget refused 146") {
		t.Errorf("budget variant: exit %d\n%s", code, out)
	}
}

func TestLabLayersBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"lab", "layers", "--attempts", "3,x"}, `lab: --attempts "3,x": want whole numbers per layer, top first, such as 4,4,4`},
		{[]string{"lab", "layers", "--attempts", "3,0,3"}, "lab: --attempts: layer 2 (api) has 0; want 1 to 10"},
		{[]string{"lab", "layers", "--budget", "1.5"}, "lab: --budget: want a ratio between 0 and 1, got 1.5"},
		{[]string{"lab", "layers", "--breaker", "-2"}, "lab: --breaker: want a threshold of at least 1, got -2"},
		{[]string{"lab", "layers", "--requests", "5000"}, "lab: --requests: want 1 to 1000, got 5000"},
		{[]string{"lab", "budget", "--attempts", "3,3"}, "set up the layers scenario: run 'stormwatch lab layers"},
		{[]string{"lab", "--breaker", "5"}, "set up the layers scenario"},
		{[]string{"lab", "layers", "--start", "yesterday"}, `lab: --start "yesterday": want an RFC 3339 time`},
		{[]string{"lab", "layers", "--start", "2026-01-01T00:00:00Z", "--realtime"}, "--start sets the fake clock; --realtime runs on the wall clock"},
	} {
		code, out, stderr := runCLI(t, "", c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d (want 2), stderr %q, want %q\n%s", c.args, code, stderr, c.want, out)
		}
	}
}
