package lab

import (
	"bytes"
	"context"
	"errors"
	"log"
	"log/slog"
	"net/http"
	"os"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/reference"
)

// within runs f and fails the test (with every goroutine's stack, to show what hung) when it has
// not returned after limit. The limit is a hang detector, not a speed requirement.
func within(t *testing.T, limit time.Duration, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		var buf bytes.Buffer
		_ = pprof.Lookup("goroutine").WriteTo(&buf, 2)
		t.Fatalf("%s: still running after %s\n%s", what, limit, buf.String())
		return nil
	}
}

// labGoroutines lists the goroutines the lab started that are still alive.
func labGoroutines() []string {
	var buf bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&buf, 2)
	var left []string
	for _, g := range strings.Split(buf.String(), "\n\n") {
		if strings.Contains(g, "stormwatch/reference/lab.(*") || strings.Contains(g, "stormwatch/reference/lab.Run") {
			left = append(left, g)
		}
	}
	return left
}

// noLabGoroutinesLeft waits briefly for goroutines that are on their way out, then fails on any
// the lab left behind.
func noLabGoroutinesLeft(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		left := labGoroutines()
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d lab goroutine(s) outlived the run:\n%s", len(left), strings.Join(left, "\n\n"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCancelStopsEveryScenario cancels each scenario at a spread of moments, including while a
// caller's request is on its way to an origin whose handler has not started yet. That request used
// to be served after the run had stopped the fake clock: the handler slept on a clock nobody moved
// again, with a context detached from everything, and the origin's Close waited for it for good
// ("httptest.Server blocked in Close ... in state active"). Every run must now return, with the
// cancellation, and leave nothing running. `-cpu 1` under load makes the window wide.
func TestCancelStopsEveryScenario(t *testing.T) {
	for _, name := range Names() {
		for i := 0; i < 16; i++ {
			ctx, cancel := context.WithCancel(context.Background())
			timer := time.AfterFunc(time.Duration(i)*250*time.Microsecond, cancel)
			err := within(t, 20*time.Second, name+" cancelled", func() error {
				_, err := Run(ctx, name, Options{})
				return err
			})
			timer.Stop()
			cancel()
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Fatalf("%s cancelled after %d x 250us: %v, want nil (done first) or context.Canceled", name, i, err)
			}
			if err != nil && !strings.Contains(err.Error(), "lab scenario "+name+": stopped") {
				t.Fatalf("%s: unclear error %q", name, err)
			}
		}
	}
	noLabGoroutinesLeft(t)
}

// TestCancelRealtime: on the wall clock, origins take seconds for callers that already left
// (deadline, post-deadline, fanout, unsafe-write). A cancelled run stops that work instead of
// waiting for it, and reports the cancellation rather than the figures of a cut-short run.
func TestCancelRealtime(t *testing.T) {
	for _, name := range []string{"deadline", "post-deadline", "fanout", "unsafe-write", "breaker-waves", "layers"} {
		ctx, cancel := context.WithCancel(context.Background())
		timer := time.AfterFunc(300*time.Millisecond, cancel)
		var res *Result
		err := within(t, 10*time.Second, name+" (realtime) cancelled", func() error {
			var err error
			res, err = Run(ctx, name, Options{Realtime: true})
			return err
		})
		timer.Stop()
		cancel()
		if !errors.Is(err, context.Canceled) || res != nil {
			t.Errorf("%s: result %v, err %v; want no result and context.Canceled", name, res, err)
		}
	}
	noLabGoroutinesLeft(t)
}

// TestCancelStopsOriginWork: work an origin does for a caller that left (here, work that only ends
// when told) is told to stop when the run is cancelled, and so are its downstream calls.
func TestCancelStopsOriginWork(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// On the wall clock: the work below blocks without waiting on the lab clock, which a fake clock
	// would (rightly) take as work in progress and never move past.
	e := newEnv(ctx, Options{Realtime: true})
	started := make(chan struct{})
	stoppedWith := make(chan error, 1)
	err := within(t, 10*time.Second, "run with endless origin work", func() error {
		_, err := e.run(func() (*Result, error) {
			endless := e.newOrigin("endless", nil, originOptions{handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				close(started)
				<-r.Context().Done()
				stoppedWith <- context.Cause(r.Context())
			})})
			c := e.client("caller", naive(1, 200*time.Millisecond), reference.NewRuntime(0))
			out := e.get(c, endless.url+"/work", nil) // gives up after 0.2 s
			if out.label != labelDeadline {
				t.Errorf("caller got %s, want its deadline", out.label)
			}
			<-started
			cancel() // SIGTERM, say, while the origin still works for the caller that left
			return &Result{}, nil
		})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case cause := <-stoppedWith:
		if !errors.Is(cause, context.Canceled) {
			t.Errorf("origin work stopped with %v, want the run's cancellation", cause)
		}
	default:
		t.Fatal("the run returned while the origin's work was still running")
	}
	noLabGoroutinesLeft(t)
}

// TestRunEndStopsLateWork: without any cancellation, work an origin would keep doing after the
// run's end (a request whose caller left before the handler started) is stopped when the run
// ends, and the fake clock no longer strands a sleeper.
func TestRunEndStopsLateWork(t *testing.T) {
	e := newEnv(context.Background(), Options{})
	var org *origin
	err := within(t, 10*time.Second, "run ending with late work", func() error {
		_, err := e.run(func() (*Result, error) {
			org = e.newOrigin("slow", always(200, time.Hour), originOptions{})
			return &Result{}, nil
		})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// The run is over: a request arriving now (as a late one would) finds the origin closed, and
	// the clock refuses to strand anyone.
	if err := within(t, 5*time.Second, "sleep after the run", func() error {
		return e.clk.Sleep(context.Background(), time.Second)
	}); err == nil {
		t.Fatal("the fake clock still accepts sleepers after the run ended")
	}
	if _, err := http.Get("http://" + org.addr); err == nil {
		t.Fatal("the origin still serves after the run ended")
	}
}

// TestServersLogToTheCallersLogger: what the origins' HTTP servers log goes to Options.Logger (or
// nowhere), never to the standard logger, which writes to the process's stderr and would draw over
// a dashboard.
func TestServersLogToTheCallersLogger(t *testing.T) {
	var std bytes.Buffer
	log.SetOutput(&std)
	defer log.SetOutput(os.Stderr)
	for _, withLogger := range []bool{true, false} {
		var got bytes.Buffer
		opts := Options{Realtime: true}
		if withLogger {
			opts.Logger = slog.New(slog.NewTextHandler(&got, nil))
		}
		e := newEnv(context.Background(), opts)
		_, err := e.run(func() (*Result, error) {
			// A handler that sets its status twice makes net/http log a complaint.
			o := e.newOrigin("sloppy", nil, originOptions{handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusOK)
				w.WriteHeader(http.StatusTeapot)
			})})
			c := e.client("caller", naive(1, 5*time.Second), reference.NewRuntime(0))
			if out := e.get(c, o.url+"/x", nil); out.label != "200" {
				t.Errorf("caller got %s", out.label)
			}
			return &Result{}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if withLogger && !strings.Contains(got.String(), "superfluous response.WriteHeader") {
			t.Errorf("the caller's logger did not get the server's complaint: %q", got.String())
		}
	}
	if std.Len() != 0 {
		t.Errorf("the lab wrote to the standard logger: %q", std.String())
	}
}

// TestRunReportsWorkThatWillNotStop: a handler that ignores the end of the run (a lab bug) is not
// waited for forever: the run closes its origin after the bound and says which origin it was.
func TestRunReportsWorkThatWillNotStop(t *testing.T) {
	var logged bytes.Buffer
	e := newEnv(context.Background(), Options{Realtime: true, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	e.drainWait, e.closeWait = 50*time.Millisecond, 50*time.Millisecond
	release := make(chan struct{})
	defer close(release)
	started := make(chan struct{})
	err := within(t, 10*time.Second, "run with a stubborn handler", func() error {
		_, err := e.run(func() (*Result, error) {
			o := e.newOrigin("stubborn", nil, originOptions{handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
				close(started)
				<-release // ignores its context
			})})
			ctx, cancel := context.WithCancel(e.ctx)
			go func() { <-started; cancel() }()
			c := e.client("caller", naive(1, 5*time.Second), reference.NewRuntime(0))
			e.doCtx(ctx, c, http.MethodGet, o.url+"/x", nil, nil) // leaves once the handler started
			return &Result{}, nil
		})
		return err
	})
	want := "origin stubborn: 1 handler(s) still running 50ms after the run ended"
	if err == nil || err.Error() != want {
		t.Fatalf("err %v, want %q", err, want)
	}
	if !strings.Contains(logged.String(), "origins did not stop cleanly") {
		t.Errorf("not logged: %q", logged.String())
	}
}
