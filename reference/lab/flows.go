package lab

import (
	"context"
	"net/http"
	"strconv"
	"sync"

	"github.com/stormwatch/stormwatch/reference/fakeclock"
)

// flowHeader tags a physical request so the origin can take over its caller's participation in
// the fake clock.
const flowHeader = "X-Lab-Flow"

// flows hands a caller's participation in the fake clock to the origin handler serving its
// request, so the clock knows the caller is waiting for the origin (and moves when the origin waits
// on the clock), and back. When a caller gives up first, it registers again (Hold) and the handler
// releases the participation it took over when done.
type flows struct {
	clk  *fakeclock.Clock
	mu   sync.Mutex
	next uint64
	m    map[uint64]*flow
}

type flow struct {
	ctx          context.Context
	handlerOwns  bool
	clientGone   bool
	handlerEnded bool
}

func newFlows(clk *fakeclock.Clock) *flows {
	f := &flows{clk: clk, m: map[uint64]*flow{}}
	if clk != nil {
		clk.AddVeto(f.resuming)
	}
	return f
}

// resuming reports a caller whose request was cancelled while the origin held its participation:
// it is about to resume before it has registered again.
func (f *flows) resuming() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fl := range f.m {
		if fl.handlerOwns && !fl.clientGone && fl.ctx.Err() != nil {
			return true
		}
	}
	return false
}

// transport wraps base with the caller side of the hand-over.
func (f *flows) transport(base http.RoundTripper) http.RoundTripper {
	if f.clk == nil {
		return base
	}
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		f.mu.Lock()
		id := f.next
		f.next++
		fl := &flow{ctx: req.Context()}
		f.m[id] = fl
		f.mu.Unlock()
		r := req.Clone(req.Context())
		r.Header.Set(flowHeader, strconv.FormatUint(id, 10))
		resp, err := base.RoundTrip(r)
		f.mu.Lock()
		if fl.handlerOwns {
			fl.clientGone = true
			f.clk.Hold()
		} else {
			delete(f.m, id)
		}
		f.mu.Unlock()
		return resp, err
	})
}

// handler wraps an origin with the server side of the hand-over.
func (f *flows) handler(next http.Handler) http.Handler {
	if f.clk == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseUint(r.Header.Get(flowHeader), 10, 64)
		f.mu.Lock()
		fl := f.m[id]
		if err != nil || fl == nil || fl.handlerEnded {
			fl = nil
		} else {
			fl.handlerOwns = true
		}
		f.mu.Unlock()
		if fl == nil {
			// Not a lab caller's request: it runs as a participant of its own.
			f.clk.Hold()
			defer f.clk.Release()
			next.ServeHTTP(w, r)
			return
		}
		defer func() {
			f.mu.Lock()
			fl.handlerOwns = false
			fl.handlerEnded = true
			if fl.clientGone {
				delete(f.m, id)
				f.clk.Release()
			}
			f.mu.Unlock()
		}()
		next.ServeHTTP(w, r)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
