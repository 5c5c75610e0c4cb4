package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
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
	// ctx is the run's own context, derived from the caller's and cancelled when the run ends.
	// Every caller's call and every origin's work lives under it, so nothing the run started
	// outlives it and the caller's cancellation reaches all of it.
	ctx   context.Context
	end   context.CancelCauseFunc
	clk   clock
	flows *flows
	opts  Options
	log   *slog.Logger
	// errorLog is the origins' http.Server.ErrorLog: the caller's logger, never the standard one.
	errorLog *log.Logger
	base     *http.Transport
	rt       http.RoundTripper
	// names gives origins their stable addresses (http://catalog:8080) and is base's dialer.
	names   *names
	origins []*origin
	seq     uint64
	seqMu   sync.Mutex
	// drainWait bounds the wait for origins finishing work for callers that left once the script is
	// done (runDrainWait); closeWait bounds the wait for each origin's handlers after they were told
	// to stop (originCloseWait). Tests shorten them.
	drainWait time.Duration
	closeWait time.Duration
	errMu     sync.Mutex
	err       error // the first failure to set the run up (an origin that could not listen)
}

// errRunOver stops what is still running for callers that left when the run ends normally.
var errRunOver = errors.New("lab run over")

func newEnv(ctx context.Context, opts Options) *env {
	e := &env{opts: opts, drainWait: runDrainWait, closeWait: originCloseWait}
	e.ctx, e.end = context.WithCancelCause(ctx)
	e.log = opts.Logger
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	e.errorLog = slog.NewLogLogger(e.log.Handler(), slog.LevelWarn)
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
	e.names = newNames()
	e.base = &http.Transport{
		// Forty concurrent callers to one origin: keep their connections instead of churning them.
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 128,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
		// Every client of the run dials through the lab's names: origins are addressed as
		// http://<name>:8080 and reached on their loopback ports; any other address is refused.
		DialContext: e.names.dial,
	}
	e.rt = e.flows.transport(e.base)
	return e
}

// run executes body with the clock moving by itself, then takes everything down: origins still
// working for callers that left may finish (unless the run was cancelled), then whatever still runs
// is told to stop, the clock is closed so no waiter on it is left behind, and the servers close.
// It returns promptly once the caller's context is cancelled.
func (e *env) run(body func() (*Result, error)) (*Result, error) {
	var stop func()
	if f := e.clk.fake(); f != nil {
		f.Hold()
		stop = f.Auto()
	}
	res, err := body()
	// Origins may still be working for callers that left: let them finish, as the experiments'
	// origins did, within a bound. A handler that has not started yet (its caller gave up while the
	// request was in flight) is not waited for: the end of the run stops it below.
	drain, cancelDrain := context.WithTimeout(e.ctx, e.drainWait)
	for _, o := range e.origins {
		o.idle(drain)
	}
	cancelDrain()
	e.end(errRunOver)
	if f := e.clk.fake(); f != nil {
		f.Release()
		stop()
		// Wake anything still asleep on the clock: nothing will move it again.
		f.Close()
	}
	e.base.CloseIdleConnections()
	var cerrs []error
	for i := len(e.origins) - 1; i >= 0; i-- {
		if cerr := e.origins[i].close(e.closeWait); cerr != nil {
			cerrs = append(cerrs, cerr)
		}
	}
	e.base.CloseIdleConnections()
	if cerr := errors.Join(cerrs...); cerr != nil {
		e.log.Warn("lab: origins did not stop cleanly", "err", cerr)
		if err == nil {
			err = cerr
		}
	}
	if serr := e.setupErr(); serr != nil && err == nil {
		err = serr
	}
	return res, err
}

// runDrainWait bounds, in real time, how long the end of a run lets origins finish work for callers
// that left. On the fake clock that work takes no real time; on the wall clock the longest is the
// fan-out's 3 s replica.
const runDrainWait = 10 * time.Second

// fail records a failure to set the run up; the run goes on (its calls fail fast) and reports it.
func (e *env) fail(err error) {
	e.errMu.Lock()
	defer e.errMu.Unlock()
	if e.err == nil {
		e.err = err
	}
}

func (e *env) setupErr() error {
	e.errMu.Lock()
	defer e.errMu.Unlock()
	return e.err
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
// The wait is not abandoned when the run is cancelled: the calls stop by themselves then.
func (e *env) parallel(n int, f func(i int)) {
	g := e.clk.newGroup()
	for i := 0; i < n; i++ {
		g.Go(func() { f(i) })
	}
	_ = g.Wait(context.Background())
}

// idleAll waits until no origin of the run is working, or the run is cancelled.
func (e *env) idleAll() {
	for _, o := range e.origins {
		o.idle(e.ctx)
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
