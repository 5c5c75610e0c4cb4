package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/stormwatch/stormwatch/reference"
	"github.com/stormwatch/stormwatch/reference/fakeclock"
	"go.opentelemetry.io/otel/trace"
)

// env is one scenario run: its clock, its origins, its transport and what it was given.
type env struct {
	ctx     context.Context
	clk     clock
	flows   *flows
	opts    Options
	base    *http.Transport
	rt      http.RoundTripper
	closers []func()
	origins []*origin
	seq     uint64
	seqMu   sync.Mutex
}

func newEnv(ctx context.Context, opts Options) *env {
	e := &env{ctx: ctx, opts: opts}
	if opts.Realtime {
		e.clk = wallClock{}
	} else {
		start := opts.Start
		if start.IsZero() {
			start = time.Now().UTC().Truncate(time.Second)
		}
		e.clk = fakeClock{fakeclock.New(start)}
	}
	e.flows = newFlows(e.clk.fake())
	e.base = &http.Transport{
		// Forty concurrent callers to one origin: keep their connections instead of churning them.
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 128,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
	e.rt = e.flows.transport(e.base)
	return e
}

// run executes body with the clock moving by itself, and cleans up.
func (e *env) run(body func() (*Result, error)) (*Result, error) {
	var stop func()
	if f := e.clk.fake(); f != nil {
		f.Hold()
		stop = f.Auto()
	}
	res, err := body()
	// Origins may still be working for callers that left: let them finish before the servers close.
	e.idleAll()
	if f := e.clk.fake(); f != nil {
		f.Release()
		stop()
	}
	e.base.CloseIdleConnections()
	for i := len(e.closers) - 1; i >= 0; i-- {
		e.closers[i]()
	}
	return res, err
}

func (e *env) tracerProvider(service string) trace.TracerProvider {
	if e.opts.TracerProvider == nil {
		return nil
	}
	return e.opts.TracerProvider(service)
}

// client builds a reference client for service on the run's clock, transport and random seed.
// Each variant passes its own runtime so breakers never leak from one variant to the next.
func (e *env) client(service string, cfg reference.Config, rt *reference.Runtime) *reference.Client {
	e.seqMu.Lock()
	e.seq++
	stream := e.seq
	e.seqMu.Unlock()
	cfg.Service = service
	opts := []reference.Option{
		reference.WithClock(e.clk),
		reference.WithRand(rand.NewPCG(e.opts.Seed, stream)),
		reference.WithBase(e.rt),
		reference.WithRuntime(rt),
	}
	if tp := e.tracerProvider(service); tp != nil {
		opts = append(opts, reference.WithTracerProvider(tp))
	}
	if e.opts.MeterProvider != nil {
		opts = append(opts, reference.WithMeterProvider(e.opts.MeterProvider))
	}
	c, err := reference.NewClient(cfg, opts...)
	if err != nil {
		// The lab's configurations are constants: an error here is a bug in the lab.
		panic(fmt.Sprintf("lab: client for %s: %v", service, err))
	}
	return c
}

// parallel runs f(i) for i in [0, n) concurrently and waits, letting the clock move meanwhile.
func (e *env) parallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	wg.Add(n)
	for i := 0; i < n; i++ {
		e.clk.Go(func() {
			defer wg.Done()
			f(i)
		})
	}
	e.clk.Wait(wg.Wait)
}

// idleAll waits until no origin of the run is working.
func (e *env) idleAll() {
	for _, o := range e.origins {
		o.idle()
	}
}

// sleep lets lab time pass for the scenario's own script.
func (e *env) sleep(d time.Duration) { _ = e.clk.Sleep(e.ctx, d) }

// outcome is how one logical call ended, as the tables name it.
type outcome struct {
	label string
	ok    bool
	start time.Time
	end   time.Time
	err   error
}

// Table labels for call endings that are not HTTP statuses.
const (
	labelRefused  = "refused"
	labelDeadline = "deadline"
	labelConnect  = "connect error"
	labelError    = "error"
)

// get makes one GET through c and reads the answer.
func (e *env) get(c interface {
	Do(context.Context, *http.Request) (*http.Response, error)
}, url string, hdr http.Header) outcome {
	return e.do(c, http.MethodGet, url, hdr, nil)
}

func (e *env) do(c interface {
	Do(context.Context, *http.Request) (*http.Response, error)
}, method, url string, hdr http.Header, body []byte) outcome {
	return e.doCtx(e.ctx, c, method, url, hdr, body)
}

// doCtx is do under ctx (a parent span, for instance).
func (e *env) doCtx(ctx context.Context, c interface {
	Do(context.Context, *http.Request) (*http.Response, error)
}, method, url string, hdr http.Header, body []byte) outcome {
	start := e.clk.Now()
	req, err := newRequest(ctx, method, url, body)
	if err != nil {
		return outcome{label: labelError, start: start, end: start, err: err}
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := c.Do(ctx, req)
	if err != nil {
		return outcome{label: labelOf(err), start: start, end: e.clk.Now(), err: err}
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return outcome{label: fmt.Sprint(resp.StatusCode), ok: resp.StatusCode < 400, start: start, end: e.clk.Now()}
}

func labelOf(err error) string {
	var boe *reference.BreakerOpenError
	switch {
	case errors.As(err, &boe), errors.Is(err, errRefusedByHandRolled):
		return labelRefused
	case errors.Is(err, context.DeadlineExceeded):
		return labelDeadline
	case isConnectError(err):
		return labelConnect
	}
	return labelError
}

// tally sums outcomes into a row.
func tally(row *Row, outs []outcome, start time.Time) {
	row.Calls = len(outs)
	if row.Outcomes == nil {
		row.Outcomes = map[string]int{}
	}
	var slowest time.Duration
	for _, o := range outs {
		row.Outcomes[o.label]++
		if o.ok {
			row.OK++
		}
		if d := o.end.Sub(start); d > slowest {
			slowest = d
		}
	}
	row.SlowestS = round2(slowest.Seconds())
}

func round2(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }

// sortedKeys orders outcome labels: statuses first, then words.
func sortedKeys(m map[string]int) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool {
		di, dj := ks[i] != "" && ks[i][0] >= '0' && ks[i][0] <= '9', ks[j] != "" && ks[j][0] >= '0' && ks[j][0] <= '9'
		if di != dj {
			return di
		}
		return ks[i] < ks[j]
	})
	return ks
}
