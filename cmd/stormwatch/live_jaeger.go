package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/stormwatch/stormwatch/sources/jaeger"
	"github.com/stormwatch/stormwatch/spans"
)

// liveJaegerFlags are the dashboard's flags for following a Jaeger.
type liveJaegerFlags struct {
	jaegerFlags
	poll time.Duration
}

// liveClient checks the flags and builds the client, nil without --jaeger. It runs before the
// dashboard takes the terminal, so a mistake is reported plainly.
func (f *liveJaegerFlags) liveClient() (*jaeger.Client, error) {
	if f.url == "" {
		return nil, nil
	}
	if f.poll <= 0 {
		return nil, fmt.Errorf("--poll %s: must be positive", f.poll)
	}
	// The dashboard's span detail shows every attribute, as for spans received over OTLP.
	return f.client(spans.DecodeOptions{AllAttributes: true})
}

// follow starts following c's traces into sink until ctx ends and returns the follower, for the
// header; nil without a client.
func (f *liveJaegerFlags) follow(ctx context.Context, c *jaeger.Client, sink spans.Consumer, log *slog.Logger) *jaeger.Follower {
	if c == nil {
		return nil
	}
	fl := &jaeger.Follower{Client: c, Query: jaegerQuery(f.jaegerFlags, time.Time{}, time.Time{}), Poll: f.poll, Sink: sink}
	var last string
	fl.OnPoll = func(st jaeger.Status) {
		// Log changes of health, not every poll.
		if s := fmt.Sprint(st.Err == nil, st.Full); s != last {
			last = s
			if st.Err == nil {
				log.Info("jaeger answers", "url", c.URL(), "api", c.API(), "status", st.String())
			} else {
				log.Warn("jaeger fails", "url", c.URL(), "err", st.Err)
			}
		}
	}
	go fl.Run(ctx)
	return fl
}

// upstream is the header's view of a follower.
func upstream(fl *jaeger.Follower) func() (string, bool) {
	return func() (string, bool) {
		st := fl.Status()
		return st.String() + " · " + fl.Client.URL(), st.Err == nil
	}
}
