package tui

import (
	"strings"
	"sync"
	"testing"
)

// TestHeaderShowsUpstream: a source the dashboard polls has its health in the header, and the
// header follows it when it goes down and comes back; a long error is cut to the terminal width.
func TestHeaderShowsUpstream(t *testing.T) {
	var mu sync.Mutex
	status, healthy := "jaeger ok, 3 traces", true
	opt := testOptions(fixedSource(nil))
	opt.Upstream = func() (string, bool) {
		mu.Lock()
		defer mu.Unlock()
		return status, healthy
	}
	tm := startTUI(t, New(opt), "jaeger ok, 3 traces")
	mu.Lock()
	status, healthy = "jaeger DOWN since 10:00:00: connection refused "+strings.Repeat("x", 300), false
	mu.Unlock()
	waitFor(t, tm, "jaeger DOWN since 10:00:00")
	view := finalView(t, tm)
	for i, l := range strings.Split(view, "\n") {
		if w := len([]rune(l)); w > testW {
			t.Errorf("line %d is %d wide, over %d", i, w, testW)
		}
	}
}
