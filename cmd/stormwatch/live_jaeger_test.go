package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/sources/jaeger/jaegertest"
	"github.com/stormwatch/stormwatch/spans"
)

// signalSink forwards to the session and says how many traces arrived.
type signalSink struct {
	next spans.Consumer
	got  chan int
}

func (s signalSink) ConsumeBatch(ctx context.Context, b *spans.Batch) error {
	n := len(b.Spans)
	err := s.next.ConsumeBatch(ctx, b)
	s.got <- n
	return err
}

// TestLiveFollowsJaeger wires the dashboard's --jaeger flags to a real Jaeger holding a retry
// storm recorded half a minute ago: the first search finds it, the live analyzer reports its
// amplification, the header says Jaeger is fine; then Jaeger stops, the header says it is down
// and the log says so once.
func TestLiveFollowsJaeger(t *testing.T) {
	srv := jaegertest.Start(t)
	all := readAllSpans(t, fixture(t, "amplification-27-stock"))
	last, service := int64(0), ""
	traces := map[spans.TraceID]bool{}
	for _, s := range all {
		last = max(last, s.EndUnixNano)
		traces[s.TraceID] = true
		if s.ParentID.IsZero() {
			service = s.Service()
		}
	}
	// Move the recording to end 30 s ago, inside the first search's window.
	shift := time.Now().Add(-30*time.Second).UnixNano() - last
	for i := range all {
		all[i].StartUnixNano += shift
		all[i].EndUnixNano += shift
		for j := range all[i].Events {
			all[i].Events[j].TimeUnixNano += shift
		}
	}
	srv.SendOTLPJSON(t, batchJSON(t, &spans.Batch{Spans: all}))

	s, err := newAnalysisSession(&analysisFlags{settle: time.Hour}, 1_000_000, nil)
	if err != nil {
		t.Fatal(err)
	}
	j := liveJaegerFlags{jaegerFlags: jaegerFlags{url: srv.QueryURL, service: service, limit: 100, timeout: 5 * time.Second}, poll: 20 * time.Millisecond}
	c, err := j.liveClient()
	if err != nil {
		t.Fatal(err)
	}
	logR, logW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan int, 100)
	fl := j.follow(ctx, c, signalSink{s, got}, slog.New(slog.NewTextHandler(logW, nil)))
	lines := bufio.NewScanner(logR)
	nextLog := func(want string) {
		t.Helper()
		for lines.Scan() {
			if strings.Contains(lines.Text(), want) {
				return
			}
		}
		t.Fatalf("the log ended before %q", want)
	}
	nextLog("jaeger answers")
	received := 0
	for range traces {
		received += <-got
	}
	if received != len(all) {
		t.Errorf("%d spans handed to the analyzer, %d sent", received, len(all))
	}
	s.flush()
	rep := s.Snapshot(time.Now()).Report
	if len(rep.Findings) == 0 || rep.Findings[0].Detector != "retry-amplification" {
		t.Errorf("live findings %s", mustJSON(rep.Findings))
	}
	if st, ok := upstream(fl)(); !ok || st != fmt.Sprintf("jaeger ok, %d traces · %s", len(traces), srv.QueryURL) {
		t.Errorf("header %q ok=%v", st, ok)
	}

	srv.Stop()
	nextLog("jaeger fails")
	if st, ok := upstream(fl)(); ok || !strings.HasPrefix(st, "jaeger DOWN since ") || !strings.Contains(st, srv.QueryURL) {
		t.Errorf("header %q ok=%v", st, ok)
	}
	cancel()
	// The follower may be writing a log line: let it finish rather than block on the pipe.
	go io.Copy(io.Discard, logR)
}
