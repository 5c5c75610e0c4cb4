package cost

import (
	"slices"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/spans"
)

// Request is what retries cost one request: a root span of a trace with no parent named.
type Request struct {
	// Service and Name are the entry point: the root span's service.name and span name.
	Service, Name string
	// StartUnixNano and EndUnixNano are the root span's.
	StartUnixNano, EndUnixNano int64
	// Parts is its critical path by part.
	Parts Parts
	// Probability is the probability with which the request was sampled, from its spans (see
	// Probability); 0 when they do not say.
	Probability float64
	// Deps are the dependencies the request called, by name.
	Deps []Dep
}

// Dep is what retries toward one dependency cost one request.
type Dep struct {
	Dependency string
	// Added is the failed and pause time on the request's critical path charged to operations
	// toward the dependency (the outermost retrying operation, when layers nest); Hedged the
	// losing hedges' time.
	Added, Hedged int64
	// Calls counts the calls to it; Extra those made by retries and hedges, or inside a copy
	// that a layer above made by retrying.
	Calls, Extra int
	// LateNanos is the time the dependency's SERVER spans went on after their caller's CLIENT
	// span ended (beyond the clock skew tolerated).
	LateNanos int64
}

// Measure measures every request of t (ops are its operations, skew the clock skew tolerated
// between services, in ns). Its cost is linear in the spans and calls but for sorting each span's
// children once and a binary search per call.
func Measure(t *analyzer.Trace, ops []*analyzer.Operation, skew int64) []Request {
	var reqs []Request
	var rootOf []int32
	for _, r := range t.Roots() {
		if !isRequest(&t.Spans[r]) {
			continue
		}
		if reqs == nil {
			rootOf = make([]int32, t.Len())
			for i := range rootOf {
				rootOf[i] = -1
			}
		}
		rootOf[r] = int32(len(reqs))
		k := int32(len(reqs))
		t.Walk(int(r), func(j int) bool { rootOf[j] = k; return true })
		s := &t.Spans[r]
		reqs = append(reqs, Request{Service: s.Service(), Name: s.Name, StartUnixNano: t.Start(int(r)),
			EndUnixNano: t.End(int(r)), Probability: Probability(t, int(r))})
	}
	if len(reqs) == 0 {
		return nil
	}
	m := newMarks(t, ops)
	// A request calls a few dependencies, found by a scan; one that calls many (a fan-out over
	// thousands of origins) gets a map, so that no trace costs the square of its width.
	type reqDep struct {
		q    *Request
		name string
	}
	var many map[reqDep]int
	dep := func(q *Request, name string) *Dep {
		if many != nil {
			if k, ok := many[reqDep{q, name}]; ok {
				return &q.Deps[k]
			}
		} else {
			for i := range q.Deps {
				if q.Deps[i].Dependency == name {
					return &q.Deps[i]
				}
			}
		}
		q.Deps = append(q.Deps, Dep{Dependency: name})
		if many == nil && len(q.Deps) > 16 {
			many = map[reqDep]int{}
			for k := range reqs {
				for i, d := range reqs[k].Deps {
					many[reqDep{&reqs[k], d.Dependency}] = i
				}
			}
		}
		if many != nil {
			many[reqDep{q, name}] = len(q.Deps) - 1
		}
		return &q.Deps[len(q.Deps)-1]
	}
	for _, o := range ops {
		for i := range o.Attempts {
			for _, id := range o.Attempts[i].Calls {
				j, ok := t.Lookup(id)
				if !ok || rootOf[j] < 0 {
					continue
				}
				d := dep(&reqs[rootOf[j]], o.Dependency)
				d.Calls++
				if m.copied[j] {
					d.Extra++
				}
				if t.Spans[j].Kind != spans.KindClient {
					continue
				}
				gaveUp := t.End(j)
				for _, c := range t.Children(j) {
					if t.Spans[c].Kind != spans.KindServer {
						continue
					}
					if late := t.End(int(c)) - max(t.Start(int(c)), gaveUp); late > skew {
						d.LateNanos += late
					}
				}
			}
		}
	}
	for _, r := range t.Roots() {
		k := rootOf[r]
		if k < 0 {
			continue
		}
		q := &reqs[k]
		m.path(int(r))
		for _, s := range m.segs {
			q.Parts.add(s)
			if s.Op < 0 {
				continue
			}
			d := dep(q, ops[s.Op].Dependency)
			if s.Part == PartHedge {
				d.Hedged += s.To - s.From
			} else {
				d.Added += s.To - s.From
			}
		}
		slices.SortFunc(q.Deps, func(a, b Dep) int { return compareStrings(a.Dependency, b.Dependency) })
	}
	return reqs
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// AddedLatency is the latency retries added to the request whose trace holds span i: the time
// its critical path spent in failed attempts that were retried and in pauses between attempts,
// in nanoseconds; -1 when the span's root is not a request (an orphan).
func AddedLatency(t *analyzer.Trace, ops []*analyzer.Operation, i int) int64 {
	for p := i; p >= 0; p = t.Parent(p) {
		i = p
	}
	if !isRequest(&t.Spans[i]) {
		return -1
	}
	m := newMarks(t, ops)
	m.path(i)
	var parts Parts
	for _, s := range m.segs {
		parts.add(s)
	}
	return parts.Added()
}
