package whatif

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/policy"
)

// Assumption is printed with every prediction: what the numbers rest on.
const Assumption = "outcomes per attempt as recorded; a success ends the loop; work below an attempt happens only if the attempt is made; " +
	"extra attempts repeat the last recorded one; a retry budget allows retries up to ratio x first attempts per owner and dependency, in start order; " +
	"a breaker opens after its threshold of consecutive failed operations per owner and dependency, in start order, and stays open"

// Row is one dependency: the physical calls recorded and predicted.
type Row struct {
	Dependency string `json:"dependency"`
	Service    string `json:"service,omitempty"`
	Recorded   int    `json:"recorded"`
	Predicted  int    `json:"predicted"`
}

// Prediction is the outcome of a what-if.
type Prediction struct {
	Changes    []string `json:"changes"`
	Assumption string   `json:"assumption"`
	// Rows are per dependency, the most recorded calls first.
	Rows []Row `json:"dependencies"`
	// Operations counts the recorded operations the prediction walked.
	Operations int `json:"operations"`
}

// limits are the changed settings of one layer; zero means "as recorded".
type limits struct {
	maxAttempts int
	maxFanout   int
	budget      float64
	hasBudget   bool
	breaker     int
}

type budgetKey struct{ owner, dep string }

type predictor struct {
	byLayer  map[string]limits
	all      limits                                          // "*"
	children map[*analyzer.Operation][][]*analyzer.Operation // per attempt index
	budget   map[budgetKey]*[2]float64                       // first attempts, retries
	failures map[budgetKey]int                               // consecutive failed operations; -1 once open
	calls    map[string]float64                              // predicted calls per dependency
	names    map[string]string                               // origin -> dependency (see namesOfOrigins)
}

// Predict replays ops (every operation of the input: engine.Snapshot's Operations) under the
// changes. Operations of one trace must be complete (Parent links intact) for the layers below to
// be predicted; an operation whose parent is missing is replayed as a root.
func Predict(ops []*analyzer.Operation, changes []policy.Change) Prediction {
	p := &predictor{byLayer: map[string]limits{}, children: map[*analyzer.Operation][][]*analyzer.Operation{},
		budget: map[budgetKey]*[2]float64{}, failures: map[budgetKey]int{}, calls: map[string]float64{}}
	pred := Prediction{Assumption: Assumption, Operations: len(ops)}
	for _, c := range changes {
		pred.Changes = append(pred.Changes, c.String())
		l := p.byLayer[c.Layer]
		if c.Layer == "*" {
			l = p.all
		}
		switch c.Field {
		case policy.FieldMaxAttempts:
			l.maxAttempts = int(c.Value)
		case policy.FieldMaxFanout:
			l.maxFanout = int(c.Value)
		case policy.FieldRetryBudget:
			l.budget, l.hasBudget = c.Value, true
		case policy.FieldBreaker:
			l.breaker = int(c.Value)
		}
		if c.Layer == "*" {
			p.all = l
		} else {
			p.byLayer[c.Layer] = l
		}
	}

	held := make(map[*analyzer.Operation]bool, len(ops))
	for _, op := range ops {
		held[op] = true
	}
	recorded := map[string]int{}
	services := map[string]string{}
	p.names = namesOfOrigins(ops)
	var roots []*analyzer.Operation
	for _, op := range ops {
		for i := range op.Attempts {
			a := &op.Attempts[i]
			for c := range a.Calls {
				recorded[p.dependencyOf(op, a, c)]++
			}
		}
		if op.DependencyService != "" {
			services[op.Dependency] = op.DependencyService
		}
		if op.Parent == nil || !held[op.Parent] {
			roots = append(roots, op)
			continue
		}
		k := attemptOf(op.Parent, op)
		ch := p.children[op.Parent]
		if ch == nil {
			ch = make([][]*analyzer.Operation, len(op.Parent.Attempts))
			p.children[op.Parent] = ch
		}
		ch[k] = append(ch[k], op)
	}
	// Start order, so a budget spends its tokens as the traffic did.
	slices.SortStableFunc(roots, func(a, b *analyzer.Operation) int { return cmp.Compare(a.StartUnixNano, b.StartUnixNano) })
	for _, ch := range p.children {
		for _, list := range ch {
			slices.SortStableFunc(list, func(a, b *analyzer.Operation) int { return cmp.Compare(a.StartUnixNano, b.StartUnixNano) })
		}
	}
	for _, r := range roots {
		p.replay(r, 1)
	}
	for dep, n := range recorded {
		pred.Rows = append(pred.Rows, Row{Dependency: dep, Service: services[dep], Recorded: n, Predicted: int(math.Round(p.calls[dep]))})
	}
	slices.SortFunc(pred.Rows, func(a, b Row) int {
		return cmp.Or(cmp.Compare(b.Recorded, a.Recorded), cmp.Compare(a.Dependency, b.Dependency))
	})
	return pred
}

// attemptOf finds the attempt of parent that child ran under: the one its time overlaps most
// (clocks of different services drift, so containment is judged by overlap, not by edges).
func attemptOf(parent, child *analyzer.Operation) int {
	best, bestOverlap := 0, int64(-1<<62)
	for i := range parent.Attempts {
		a := &parent.Attempts[i]
		ov := min(a.EndUnixNano, child.EndUnixNano) - max(a.StartUnixNano, child.StartUnixNano)
		if ov > bestOverlap || ov == bestOverlap && a.StartUnixNano <= child.StartUnixNano {
			best, bestOverlap = i, ov
		}
	}
	return best
}

func (p *predictor) limitsOf(owner string) limits {
	l, ok := p.byLayer[owner]
	if !ok {
		return p.all
	}
	if l.maxAttempts == 0 {
		l.maxAttempts = p.all.maxAttempts
	}
	if l.maxFanout == 0 {
		l.maxFanout = p.all.maxFanout
	}
	if !l.hasBudget {
		l.budget, l.hasBudget = p.all.budget, p.all.hasBudget
	}
	if l.breaker == 0 {
		l.breaker = p.all.breaker
	}
	return l
}

// try is one turn of a retry loop: a first attempt or retry, with the resends and hedges that
// belong to it.
type try struct{ first, last int } // attempt indexes, inclusive

func tries(op *analyzer.Operation) []try {
	var out []try
	for i := range op.Attempts {
		k := op.Attempts[i].Kind
		if len(out) > 0 && (k == analyzer.AttemptKindResend || k == analyzer.KindHedge) {
			out[len(out)-1].last = i
			continue
		}
		out = append(out, try{i, i})
	}
	return out
}

// replay adds op's predicted calls, scaled by weight (the share of it that still happens when a
// fan-out above was narrowed).
func (p *predictor) replay(op *analyzer.Operation, weight float64) {
	ts := tries(op)
	if len(ts) == 0 {
		return
	}
	l := p.limitsOf(op.Owner)
	if l.breaker > 0 {
		// The breaker judges the operation as a whole (never its attempts), as the reference
		// client's does: open, it refuses the operation before anything leaves.
		k := budgetKey{op.Owner, op.Dependency}
		if p.failures[k] < 0 {
			return
		}
		if p.replayTries(op, ts, l, weight) {
			p.failures[k] = 0
		} else if p.failures[k]++; p.failures[k] >= l.breaker {
			p.failures[k] = -1
		}
		return
	}
	p.replayTries(op, ts, l, weight)
}

// replayTries replays op's retry loop under l and says whether it ended in a success.
func (p *predictor) replayTries(op *analyzer.Operation, ts []try, l limits, weight float64) bool {
	n := len(ts)
	if l.maxAttempts > 0 {
		n = l.maxAttempts
	}
	var bk *[2]float64
	if l.hasBudget {
		k := budgetKey{op.Owner, op.Dependency}
		if bk = p.budget[k]; bk == nil {
			bk = &[2]float64{}
			p.budget[k] = bk
		}
	}
	for i := 0; i < n; i++ {
		t := ts[min(i, len(ts)-1)]
		if i >= len(ts) && !extendable(op) {
			break
		}
		if bk != nil {
			if i == 0 {
				bk[0] += weight
			} else {
				if bk[1]+weight > l.budget*bk[0]+1e-9 {
					break // refused by the budget: nothing leaves
				}
				bk[1] += weight
			}
		}
		ok := false
		for j := t.first; j <= t.last; j++ {
			a := &op.Attempts[j]
			calls := len(a.Calls)
			share := 1.0
			if l.maxFanout > 0 && calls > l.maxFanout {
				share = float64(l.maxFanout) / float64(calls)
				calls = l.maxFanout
			}
			for c := range calls {
				p.calls[p.dependencyOf(op, a, c)] += weight
			}
			if ch := p.children[op]; ch != nil {
				for _, c := range ch[j] {
					p.replay(c, weight*share)
				}
			}
			ok = ok || a.Outcome == analyzer.OutcomeOK
		}
		if ok {
			return true // a success ends the loop
		}
	}
	return false
}

// dependencyOf is the dependency call c of attempt a went to: op's, unless the attempt reached
// several origins (fan-out) and another operation names the one of call c otherwise. An attempt
// lists its distinct origins in the order its calls first reached them; with one origin, or one
// call per origin, that is exact.
func (p *predictor) dependencyOf(op *analyzer.Operation, a *analyzer.Attempt, c int) string {
	if len(a.Origins) < 2 {
		return op.Dependency
	}
	if name, ok := p.names[a.Origins[min(c, len(a.Origins)-1)]]; ok {
		return name
	}
	return op.Dependency
}

// namesOfOrigins maps each origin to the dependency the analyzer named it by, learnt from the
// attempts that reached that origin alone; where several names were given to one origin, the
// smallest, so that the answer does not depend on the order of ops.
func namesOfOrigins(ops []*analyzer.Operation) map[string]string {
	names := map[string]string{}
	for _, op := range ops {
		for i := range op.Attempts {
			if o := op.Attempts[i].Origins; len(o) == 1 && op.Dependency != "" {
				if cur, ok := names[o[0]]; !ok || op.Dependency < cur {
					names[o[0]] = op.Dependency
				}
			}
		}
	}
	return names
}

// extendable says whether more attempts than recorded would have been made had the cap been
// higher: the loop stopped at its cap, not on a success, a permanent outcome, a deadline, a
// budget or a breaker.
func extendable(op *analyzer.Operation) bool {
	last := &op.Attempts[len(op.Attempts)-1]
	switch last.Outcome {
	case analyzer.OutcomeOK, analyzer.OutcomePermanent, analyzer.OutcomeRefused, analyzer.OutcomeCancelled:
		return false
	}
	return op.StopReason == "" || op.StopReason == "max_attempts"
}

// Summary is one line: the total recorded and predicted.
func (p *Prediction) Summary() string {
	rec, pre := 0, 0
	for _, r := range p.Rows {
		rec += r.Recorded
		pre += r.Predicted
	}
	return fmt.Sprintf("%s: %d physical calls recorded, %d predicted", strings.Join(p.Changes, ", "), rec, pre)
}

// Layers are the services that own a retry loop in ops, sorted: the names a change can address.
func Layers(ops []*analyzer.Operation) []string {
	seen := map[string]bool{}
	for _, op := range ops {
		if op.Owner != "" {
			seen[op.Owner] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// CheckLayers refuses a change to a layer no operation of ops has: a typo would otherwise predict
// "as recorded" for every dependency and look like a finding that the change does nothing.
func CheckLayers(ops []*analyzer.Operation, changes []policy.Change) error {
	layers := Layers(ops)
	for _, c := range changes {
		if c.Layer == "*" || slices.Contains(layers, c.Layer) {
			continue
		}
		if len(layers) == 0 {
			return fmt.Errorf("change %q: no layer %q in these traces, which have no retry loop at all", c.String(), c.Layer)
		}
		return fmt.Errorf("change %q: no layer %q in these traces; the layers that own retries are %s (or * for all)",
			c.String(), c.Layer, strings.Join(layers, ", "))
	}
	return nil
}
