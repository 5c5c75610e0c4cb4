package reference

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"
)

// TestBulkheadWaitCountsAgainstTheDeadline runs on the real clock: nothing is timed, only ordered.
// With one slot taken, a second call waits for it inside its budget and fails by its deadline
// without reaching the origin.
func TestBulkheadWaitCountsAgainstTheDeadline(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 4)
	base := roundTripper(func(r *http.Request) (*http.Response, error) {
		entered <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
		return &http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}}, nil
	})
	tr, err := New(Config{Timeout: time.Minute, Bulkhead: BulkheadConfig{MaxConcurrent: 1}},
		WithBase(base), WithRuntime(NewRuntime(0)))
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://dep.test/a", nil)
		resp, err := tr.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		first <- err
	}()
	<-entered // the first call holds the only slot
	// The second call's budget is its context's 50 ms (earlier than the client's minute).
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://dep.test/b", nil)
	_, err = tr.RoundTrip(req)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second call: %v, want its deadline while waiting for the slot", err)
	}
	select {
	case <-entered:
		t.Fatal("the second call reached the origin past the bulkhead")
	default:
	}
	close(release)
	<-first
}
