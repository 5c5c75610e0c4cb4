package reference_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/stormwatch/stormwatch/reference"
)

// A service adopts the client by changing its transport, and its handlers by wrapping them.
func Example() {
	var calls int
	backend := httptest.NewServer(reference.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		if calls == 1 {
			w.WriteHeader(http.StatusServiceUnavailable) // a transient failure, retried
			return
		}
		_, hasDeadline := r.Context().Deadline() // the caller's deadline arrived with the request
		fmt.Fprintf(w, "deadline propagated: %v", hasDeadline)
	})))
	defer backend.Close()

	rt, err := reference.New(reference.Config{
		Service: "orders",
		Timeout: 2 * time.Second,
		Retry:   reference.RetryConfig{Base: time.Millisecond, Cap: 5 * time.Millisecond},
	}, reference.WithRuntime(reference.NewRuntime(0)))
	if err != nil {
		panic(err)
	}
	client := &http.Client{Transport: rt}

	resp, err := client.Get(backend.URL + "/stock")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	body := make([]byte, 64)
	n, _ := resp.Body.Read(body)
	fmt.Println(resp.StatusCode, string(body[:n]))
	fmt.Println("attempts:", rt.Stats().Attempts, "retries:", rt.Stats().Retries)
	// Output:
	// 200 deadline propagated: true
	// attempts: 2 retries: 1
}
