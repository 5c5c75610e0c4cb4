package spans_test

import (
	"testing"

	"github.com/stormwatch/stormwatch/spans"
)

// Release calls the producer's hook once however often the owner calls it, and is harmless on a
// batch without one (a trace file's, the connector's).
func TestBatchReleaseCallsTheHookOnce(t *testing.T) {
	calls := 0
	b := &spans.Batch{Spans: make([]spans.Span, 2)}
	b.SetRelease(func() { calls++ })
	b.Release()
	b.Release()
	if calls != 1 {
		t.Errorf("hook called %d times, want 1", calls)
	}
	if len(b.Spans) != 2 {
		t.Errorf("Release changed the batch: %d spans", len(b.Spans))
	}
	(&spans.Batch{}).Release()
}
