package reference_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync/atomic"
	"testing"

	"github.com/stormwatch/stormwatch/reference"
)

// flaky answers 503 to its first request and 200 after.
func flaky(t *testing.T) (*httptest.Server, *atomic.Int32) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

// TestZeroTransport: a Transport declared without New works, with New(Config{})'s defaults: its
// Config is the same, and a transient failure is retried.
func TestZeroTransport(t *testing.T) {
	var tr reference.Transport
	want, err := reference.New(reference.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if got := tr.Config(); !reflect.DeepEqual(got, want.Config()) {
		t.Fatalf("zero Transport's Config\n%+v\nwant New(Config{})'s\n%+v", got, want.Config())
	}
	srv, calls := flaky(t)
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || calls.Load() != 2 {
		t.Fatalf("status %d after %d calls, want 200 after a retry", resp.StatusCode, calls.Load())
	}
	if st := tr.Stats(); st.Operations != 1 || st.Attempts != 2 || st.Retries != 1 {
		t.Fatalf("stats %+v, want 1 operation of 2 attempts", st)
	}
	tr.CloseIdleConnections()
}

// TestZeroClient: a Client declared without NewClient works over a zero Transport, and its
// accessors agree with each other.
func TestZeroClient(t *testing.T) {
	var c reference.Client
	if c.HTTPClient().Transport != c.Transport() {
		t.Fatal("the zero Client's http.Client does not go through its Transport")
	}
	srv, calls := flaky(t)
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	resp, err := c.Do(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || calls.Load() != 2 {
		t.Fatalf("status %d after %d calls, want 200 after a retry", resp.StatusCode, calls.Load())
	}
	if st := c.Transport().Stats(); st.Operations != 1 || st.Attempts != 2 {
		t.Fatalf("stats %+v, want 1 operation of 2 attempts", st)
	}
}

// TestZeroRuntime: a Runtime declared without NewRuntime holds the breakers of the clients that
// use it: one that trips there refuses the next call.
func TestZeroRuntime(t *testing.T) {
	var rt reference.Runtime
	if rt.Len() != 0 {
		t.Fatal("a zero Runtime holds breakers")
	}
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	c, err := reference.NewClient(reference.Config{Retry: reference.RetryConfig{MaxAttempts: 1},
		Breaker: reference.BreakerConfig{Threshold: 1}}, reference.WithRuntime(&rt))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		if resp, err := c.Do(context.Background(), req); err == nil {
			resp.Body.Close()
		}
	}
	if rt.Len() != 1 || calls.Load() != 1 || c.Transport().Stats().BreakerRefusals != 1 {
		t.Fatalf("runtime holds %d breakers; origin saw %d calls; %d refusals: want 1, 1, 1",
			rt.Len(), calls.Load(), c.Transport().Stats().BreakerRefusals)
	}
}
