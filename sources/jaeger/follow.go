package jaeger

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/stormwatch/stormwatch/internal/words"
	"github.com/stormwatch/stormwatch/spans"
)

// Defaults for the zero values of Follower's settings.
const (
	DefaultPoll = 5 * time.Second
	// DefaultLag keeps the search window this far behind now, so a trace is searched once its
	// spans have reached Jaeger (exporters batch for a few seconds).
	DefaultLag = 10 * time.Second
	// maxCatchUp bounds the window searched after Jaeger was unreachable: the traces of the last
	// few minutes, not of the whole outage in one search.
	maxCatchUp = 5 * time.Minute
	// maxPollPause bounds how far the polling slows down while Jaeger fails.
	maxPollPause = time.Minute
	// initialLookback is how far back the first search reaches: a dashboard opened during an
	// incident shows the last minute at once, not only what happens next.
	initialLookback = time.Minute
)

// Follower polls a Jaeger for the traces of one service and hands each new trace to Sink once.
//
// Each poll searches the window from where the last successful one ended to Lag before now, so
// consecutive searches do not overlap and a trace is fetched once; a trace whose spans straddle
// two windows can be found by both, and is handed on only the first time. While Jaeger fails the
// window is kept (up to maxCatchUp) and polls slow down, doubling the pause up to a minute, so an
// outage is not met with a stream of searches.
type Follower struct {
	// Client and Sink are required; the rest have defaults.
	Client *Client
	// Query is the search; its Start and End are set by each poll.
	Query Query
	Poll  time.Duration
	Lag   time.Duration
	// Sink receives one batch per new trace.
	Sink spans.Consumer
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// OnPoll, when set, is called with the status after every poll (to log a change of health).
	OnPoll func(Status)

	mu     sync.Mutex
	status Status
	// seen holds the trace ids handed on, each with the end of the window it was found in, and
	// forgets them once no later window can find them again.
	seen map[spans.TraceID]time.Time
}

// Status is the follower's health, for the dashboard's header.
type Status struct {
	// LastOK is when a search last succeeded; zero before the first.
	LastOK time.Time
	// Err is the last search's error, nil when it succeeded.
	Err error
	// Traces counts the traces handed on.
	Traces int
	// Full says the last search returned Query.Limit traces: there may have been more.
	Full bool
}

// String says the status in a few words: "jaeger ok, 12 traces" or what is wrong.
func (s Status) String() string {
	switch {
	case s.Err != nil && s.LastOK.IsZero():
		return fmt.Sprintf("jaeger DOWN: %v", s.Err)
	case s.Err != nil:
		return fmt.Sprintf("jaeger DOWN since %s: %v", s.LastOK.Format("15:04:05"), s.Err)
	case s.LastOK.IsZero():
		return "jaeger connecting"
	case s.Full:
		return fmt.Sprintf("jaeger ok, %s (a search hit --limit: some were missed)", words.Count(s.Traces, "trace"))
	}
	return "jaeger ok, " + words.Count(s.Traces, "trace")
}

// Status is the current health.
func (f *Follower) Status() Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.status
}

func (f *Follower) now() time.Time {
	if f.Now != nil {
		return f.Now()
	}
	return time.Now()
}

// Run polls until ctx ends. It returns ctx's error; search failures only show in Status.
func (f *Follower) Run(ctx context.Context) error {
	poll, lag := f.Poll, f.Lag
	if poll <= 0 {
		poll = DefaultPoll
	}
	if lag <= 0 {
		lag = DefaultLag
	}
	start := f.now().Add(-lag - max(poll, initialLookback))
	pause := poll
	for {
		next, err := f.PollOnce(ctx, start, f.now().Add(-lag))
		if f.OnPoll != nil && ctx.Err() == nil {
			f.OnPoll(f.Status())
		}
		if err == nil {
			start, pause = next, poll
		} else {
			pause = min(2*pause, maxPollPause)
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// PollOnce searches [start, end) and hands on the traces not handed on before. It returns where
// the next window starts: end on success, start (or maxCatchUp before end) on failure.
func (f *Follower) PollOnce(ctx context.Context, start, end time.Time) (time.Time, error) {
	if d := end.Sub(start); d > maxCatchUp {
		start = end.Add(-maxCatchUp)
	}
	if !start.Before(end) {
		return start, nil
	}
	q := f.Query
	q.Start, q.End = start, end
	traces, found, err := f.Client.FindTraces(ctx, q)
	f.mu.Lock()
	if err != nil {
		f.status.Err = err
		f.mu.Unlock()
		return start, err
	}
	if f.seen == nil {
		f.seen = map[spans.TraceID]time.Time{}
	}
	var fresh []*spans.Batch
	for _, b := range traces {
		if len(b.Spans) == 0 {
			continue
		}
		id := b.Spans[0].TraceID
		if _, ok := f.seen[id]; ok {
			continue
		}
		f.seen[id] = end
		fresh = append(fresh, b)
	}
	// A trace is found again only by a window its spans reach into: ids found a catch-up window
	// before this one started are done with, which bounds the set by the traces of a few minutes.
	for id, at := range f.seen {
		if at.Before(start.Add(-maxCatchUp)) {
			delete(f.seen, id)
		}
	}
	f.status.Err, f.status.LastOK, f.status.Full = nil, f.now(), found >= q.Limit && q.Limit > 0
	f.status.Traces += len(fresh)
	f.mu.Unlock()
	for _, b := range fresh {
		if err := f.Sink.ConsumeBatch(ctx, b); err != nil {
			return end, fmt.Errorf("hand on trace %s: %w", b.Spans[0].TraceID, err)
		}
	}
	return end, nil
}
