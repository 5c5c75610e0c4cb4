package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stormwatch/stormwatch/tracefile"
)

// SendOptions configure sending to a collector.
type SendOptions struct {
	Target Target
	// Connections is how many requests are in flight at once, each worker on its own connection;
	// 0 means 1.
	Connections int
	// Retries is how often a refused request (429/503, RESOURCE_EXHAUSTED/UNAVAILABLE) is tried
	// again during a timed replay, after the server's Retry-After or a growing pause; 0 means 5.
	// Blast never retries: it measures what the collector takes.
	Retries int
	// Progress, when set, gets a status line every ProgressEvery (default 2s) and a summary.
	Progress      io.Writer
	ProgressEvery time.Duration
	// Duration bounds a Blast; 0 sends every request once.
	Duration time.Duration
	// Passes, when > 0, is how many times Blast sends every request, whatever Duration says.
	Passes int
}

func (o SendOptions) connections() int { return max(o.Connections, 1) }

// Stats count what a replay sent.
type Stats struct {
	Requests int64 // accepted (HTTP 200 / gRPC OK)
	Spans    int64 // in accepted requests, minus those the collector rejected as partial success
	// Rejected is the spans the collector refused through partial success.
	Rejected int64
	// Refused is the requests the collector refused as overloaded (Blast does not retry them).
	Refused int64
	Elapsed time.Duration
}

// SpansPerSecond is the accepted span rate.
func (s Stats) SpansPerSecond() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Spans) / s.Elapsed.Seconds()
}

func (s Stats) String() string {
	out := fmt.Sprintf("%d requests, %d spans accepted in %s (%.0f spans/s)", s.Requests, s.Spans, s.Elapsed.Round(time.Millisecond), s.SpansPerSecond())
	if s.Rejected > 0 {
		out += fmt.Sprintf(", %d spans rejected by the collector", s.Rejected)
	}
	if s.Refused > 0 {
		out += fmt.Sprintf(", %d requests refused as overload", s.Refused)
	}
	return out
}

// counters are Stats under concurrent update.
type counters struct {
	requests, spans, rejected, refused atomic.Int64
	start                              time.Time
}

func (c *counters) snapshot() Stats {
	return Stats{Requests: c.requests.Load(), Spans: c.spans.Load(), Rejected: c.rejected.Load(),
		Refused: c.refused.Load(), Elapsed: time.Since(c.start)}
}

func (c *counters) accepted(req *Request, res Result) {
	c.requests.Add(1)
	c.spans.Add(int64(req.Spans) - res.Rejected)
	c.rejected.Add(res.Rejected)
}

// progress prints the counters every so often until stop is closed.
func progress(w io.Writer, every time.Duration, c *counters, stop <-chan struct{}) {
	if w == nil {
		return
	}
	if every <= 0 {
		every = 2 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			fmt.Fprintf(w, "replay: %s\n", c.snapshot())
		}
	}
}

// startWorkers opens one Sender per connection opt asks for (on an error, closing those already
// open) and runs work with each in a goroutine of its own, beside the progress line, counting from
// then in c. wait waits for the workers, stops the progress line and closes the senders.
func startWorkers(opt SendOptions, c *counters, work func(*Sender)) (p Protocol, wait func(), err error) {
	senders := make([]*Sender, 0, opt.connections())
	closeAll := func() {
		for _, s := range senders {
			s.Close()
		}
	}
	for range cap(senders) {
		s, err := NewSender(opt.Target)
		if err != nil {
			closeAll()
			return "", nil, err
		}
		senders = append(senders, s)
	}
	c.start = time.Now()
	var wg sync.WaitGroup
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		progress(opt.Progress, opt.ProgressEvery, c, stop)
		close(stopped)
	}()
	for _, s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work(s)
		}()
	}
	return senders[0].Protocol(), func() {
		wg.Wait()
		close(stop)
		<-stopped
		closeAll()
	}, nil
}

// Send plays p into the target: each record, when the player says it is due, is shifted, encoded for
// the protocol and handed to one of opt.Connections workers. A request the collector refuses for
// cause, or an unreachable collector, stops the replay with an error saying which.
func Send(ctx context.Context, p *Player, opt SendOptions) (Stats, error) {
	retries := opt.Retries
	if retries <= 0 {
		retries = 5
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	c := &counters{}
	work := make(chan *Request, opt.connections())
	proto, wait, err := startWorkers(opt, c, func(s *Sender) {
		for req := range work {
			res, err := sendWithRetry(ctx, s, req, retries)
			if err != nil {
				cancel(err)
				continue // drain
			}
			c.accepted(req, res)
		}
	})
	if err != nil {
		return Stats{}, err
	}
	p.opt.Read.Raw = true
	runErr := p.Run(ctx, func(ctx context.Context, it *Item) error {
		raw, err := it.ShiftedRaw()
		if err != nil {
			return err
		}
		req, err := Encode(proto, raw, len(it.Batch.Spans)+it.Batch.Rejected)
		if err != nil {
			return err
		}
		select {
		case work <- req:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	})
	close(work)
	wait()
	st := c.snapshot()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return st, cause
	}
	if runErr != nil {
		var ee *ExportError
		if errors.As(runErr, &ee) {
			return st, ee // the position the player adds is the record in flight, not the one refused
		}
		return st, runErr
	}
	return st, nil
}

func sendWithRetry(ctx context.Context, s *Sender, req *Request, retries int) (Result, error) {
	pause := 200 * time.Millisecond
	for attempt := 0; ; attempt++ {
		res, err := s.Send(ctx, req)
		var ee *ExportError
		if err == nil || !errors.As(err, &ee) || !ee.Retryable || ee.Unreachable || attempt >= retries {
			return res, err
		}
		// Honour the collector's hint; without one, back off exponentially. A replay tool must not
		// become a retry storm of its own.
		wait := pause
		if ee.RetryAfter > 0 {
			wait = min(ee.RetryAfter, 30*time.Second)
		}
		pause = min(pause*2, 10*time.Second)
		select {
		case <-ctx.Done():
			return res, err
		case <-time.After(wait):
		}
	}
}

// LoadRequests reads every record of files, shifts it so the recording ends now - one Shift for
// all, with fresh trace ids - and encodes it once for protocol p: the pre-encoded requests Blast
// sends.
func LoadRequests(files []string, ropt tracefile.ReadOptions, p Protocol, now time.Time) ([]*Request, error) {
	ropt.Raw = true
	type rec struct {
		raw   []byte
		spans int
	}
	var recs []rec
	var last int64
	for _, f := range files {
		r, err := tracefile.Open(f, ropt)
		if err != nil {
			return nil, err
		}
		for {
			x, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				r.Close()
				return nil, err
			}
			last = max(last, recordTime(x.Batch))
			recs = append(recs, rec{raw: x.Raw, spans: len(x.Batch.Spans) + x.Batch.Rejected})
		}
		r.Close()
	}
	if len(recs) == 0 {
		return nil, ErrNoRecords
	}
	sh := Shift{Salt: newSalt()}
	if last > 0 {
		sh.Delta = wholeSeconds(now.UnixNano() - last)
	}
	out := make([]*Request, 0, len(recs))
	for i, x := range recs {
		raw, err := sh.Request(x.raw)
		if err != nil {
			return nil, err
		}
		recs[i].raw = nil // hold each request once, not twice

		req, err := Encode(p, raw, x.spans)
		if err != nil {
			return nil, err
		}
		out = append(out, req)
	}
	return out, nil
}

// forPass is req for a later pass of Blast: shifted by rel from how it was encoded - patched at the
// places its plan found when there is one, else walked and, for OTLP/JSON, encoded again.
func (req *Request) forPass(rel Shift) (*Request, error) {
	if req.plan != nil {
		if body, ok := req.plan.apply(req.Body, rel); ok {
			return &Request{Body: body, Spans: req.Spans}, nil
		}
	}
	pb := req.pb
	if pb == nil {
		pb = req.Body
	}
	raw, err := rel.request(pb, req.pbPlan)
	if err != nil {
		return nil, err
	}
	if req.pb == nil {
		return &Request{Body: raw, Spans: req.Spans}, nil
	}
	js, err := tracefile.ProtoToJSON(raw)
	if err != nil {
		return nil, err
	}
	return &Request{Body: js, Spans: req.Spans}, nil
}

// Blast sends reqs as fast as the target takes them from opt.Connections connections at once: each
// request once, opt.Passes times, or round and round for opt.Duration. Every pass after the first
// is the first moved by one Shift: forward by the time since Blast started (in whole seconds), and
// with fresh trace ids, so passes never merge into one another's traces and each keeps the
// recording's timing. Overload answers are counted (Stats.Refused), not retried; any other
// refusal, or an unreachable target, stops it with that error.
func Blast(ctx context.Context, reqs []*Request, opt SendOptions) (Stats, error) {
	if len(reqs) == 0 {
		return Stats{}, ErrNoRecords
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if opt.Duration > 0 {
		var stopTimer context.CancelFunc
		ctx, stopTimer = context.WithTimeout(ctx, opt.Duration)
		defer stopTimer()
	}
	c := &counters{}
	n := int64(len(reqs))
	limit := n
	switch {
	case opt.Passes > 0:
		limit = n * int64(opt.Passes)
	case opt.Duration > 0:
		limit = math.MaxInt64
	}
	// Requests are taken in order, and each pass's shift is drawn by whoever takes its first
	// request, under one lock: every request of a pass gets the same shift, whichever worker
	// sends it.
	var mu sync.Mutex
	next, curPass, cur := int64(0), int64(0), Shift{}
	take := func() (int64, Shift, bool) {
		mu.Lock()
		defer mu.Unlock()
		if next >= limit {
			return 0, Shift{}, false
		}
		i := next
		next++
		if pass := i / n; pass != curPass {
			curPass, cur = pass, Shift{Delta: wholeSeconds(int64(time.Since(c.start))), Salt: newSalt()}
		}
		return i, cur, true
	}
	_, wait, err := startWorkers(opt, c, func(s *Sender) {
		for ctx.Err() == nil {
			i, rel, ok := take()
			if !ok {
				return
			}
			req := reqs[i%n]
			if !rel.IsZero() {
				var err error
				if req, err = req.forPass(rel); err != nil {
					cancel(err)
					return
				}
			}
			res, err := s.Send(ctx, req)
			if err == nil {
				c.accepted(req, res)
				continue
			}
			if ctx.Err() != nil {
				return // the duration ended mid-request
			}
			var ee *ExportError
			if errors.As(err, &ee) && ee.Retryable && !ee.Unreachable {
				c.refused.Add(1)
				// Give an overloaded collector a moment rather than spinning on refusals.
				select {
				case <-ctx.Done():
				case <-time.After(min(max(ee.RetryAfter, 10*time.Millisecond), 100*time.Millisecond)):
				}
				continue
			}
			cancel(err)
			return
		}
	})
	if err != nil {
		return Stats{}, err
	}
	wait()
	st := c.snapshot()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) && !errors.Is(cause, context.DeadlineExceeded) {
		return st, cause
	}
	return st, nil
}
