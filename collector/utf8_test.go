package collector

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestStringThatIsNotUTF8IsRecorded: a span name that is not UTF-8 is acknowledged, as the
// OpenTelemetry Collector acknowledges it, and so it must be in the .jsonl recording too - with
// U+FFFD for the bad byte, since JSON cannot hold it - not logged as a failed write and left out.
func TestStringThatIsNotUTF8IsRecorded(t *testing.T) {
	w, path := newRecording(t, "jsonl")
	s := &sink{}
	c := start(t, Config{}, s, WithRecorder(w))
	req := request(0, 3, 0)
	req.ResourceSpans[0].ScopeSpans[0].Spans[1].Name = "GET /cafX"
	body := bytes.Replace(protoBody(t, req), []byte("GET /cafX"), []byte("GET /caf\xe9"), 1)
	r := post(t, c, body, map[string]string{"Content-Type": contentTypeProto})
	r.Body.Close()
	if r.StatusCode != 200 {
		t.Fatalf("status %d for a request the OpenTelemetry Collector takes", r.StatusCode)
	}
	waitFor(t, "the spans", func() bool { return s.count() >= 3 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Shutdown(ctx); err != nil { // flushes and closes the recording
		t.Fatal(err)
	}
	_, names := recording(t, path)
	if len(names) != 3 || !strings.Contains(strings.Join(names, "|"), "GET /caf\uFFFD") {
		t.Errorf("the recording holds the spans %q; want the 3 sent, one named %q", names, "GET /caf\uFFFD")
	}
}
