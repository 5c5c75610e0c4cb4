package reference

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/stormwatch/stormwatch/spans"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// hedged makes attempt n as a primary copy plus, if the primary has not answered after
// Hedge.Delay and the budget allows, a second copy. The first conclusive answer (ok or permanent)
// wins and the other copy is cancelled; if both fail the later failure decides.
func (c *call) hedged(n int, kind string, pause time.Duration) (*http.Response, class, error) {
	t := c.t
	results := make(chan result, 2)
	primaryCtx, cancelPrimaryCause := context.WithCancelCause(c.opCtx)
	cancelPrimary := func() { cancelPrimaryCause(errHedgeLost) }
	waitCtx, primaryDone := context.WithCancel(c.opCtx)
	go func() {
		r := c.physical(primaryCtx, n, kind, pause, 1)
		primaryDone()
		results <- r
	}()
	copies := 1
	var cancelHedge context.CancelFunc = func() {}
	if err := t.clock.Sleep(waitCtx, t.cfg.Hedge.Delay); err == nil && c.opCtx.Err() == nil {
		if t.budget.withdraw() {
			copies = 2
			t.stats.hedges.Add(1)
			if t.inst != nil {
				t.inst.add(c.callerCtx, t.inst.hedges, c.origin)
			}
			hedgeCtx, cancelHedgeCause := context.WithCancelCause(c.opCtx)
			cancelHedge = func() { cancelHedgeCause(errHedgeLost) }
			go func() {
				r := c.physical(hedgeCtx, n, KindHedge, t.cfg.Hedge.Delay, 2)
				r.hedge = true
				results <- r
			}()
		} else {
			t.stats.budgetRefusals.Add(1)
			if t.inst != nil {
				t.inst.add(c.callerCtx, t.inst.budgetRefusals, c.origin)
			}
		}
	}
	primaryDone()
	win := <-results
	if copies == 2 {
		if win.cls.outcome == OutcomeOK || win.cls.outcome == OutcomePermanent {
			// A conclusive first answer wins: cancel only the other copy, never the winner, whose
			// body the caller is about to read.
			if win.hedge {
				cancelPrimary()
			} else {
				cancelHedge()
			}
			go func() { finishLoser(<-results, DecisionStop) }()
		} else {
			// An inconclusive first answer: the other copy decides.
			finishLoser(win, DecisionHedge)
			win = <-results
		}
	}
	cancelBoth := func() { cancelPrimary(); cancelHedge() }
	if win.resp != nil {
		win.resp.Body = &cancelOnClose{ReadCloser: win.resp.Body, cancel: cancelBoth}
	} else {
		cancelBoth()
	}
	c.last = win.la
	return win.resp, win.cls, win.err
}

// errHedgeLost is the cause given to the copy that lost.
var errHedgeLost = errors.New("the other copy of a hedged attempt answered first")

// finishLoser closes a losing copy: its body, and its span with the decision taken.
func finishLoser(r result, decision string) {
	drain(r.resp)
	if r.la.span != nil {
		r.la.span.SetAttributes(attribute.String(spans.AttrDecision, decision))
		r.la.span.End(trace.WithTimestamp(r.la.end))
	}
}
