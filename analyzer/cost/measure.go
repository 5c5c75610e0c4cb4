package cost

import (
	"cmp"
	"slices"
	"strings"

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

// Scratch is the memory Measure works in, kept from trace to trace by a caller that measures
// many (the engine keeps one per analysis goroutine): what it returns is its own. The zero value
// is ready; not for concurrent use.
type Scratch struct {
	m      marks
	rootOf []int32
	reqs   []Request // the requests while they are measured, copied out by result
	deps   []reqDep
	many   map[depKey]int32
}

// Trim drops what sc grew past max elements for one large trace (its arrays are by span, by
// request and by dependency), so that a Scratch kept from trace to trace holds what its usual
// traces need, not what the largest one ever measured did.
func (sc *Scratch) Trim(max int) {
	m := &sc.m
	// many is not looked at: measure empties it, and it never holds more than deps did.
	if cap(sc.rootOf) > max || cap(sc.reqs) > max || cap(sc.deps) > max ||
		cap(m.ownPart) > max || cap(m.part) > max || cap(m.ownOp) > max || cap(m.op) > max ||
		cap(m.ownCopy) > max || cap(m.copied) > max || cap(m.pauses) > max || cap(m.kids) > max || cap(m.segs) > max {
		*sc = Scratch{}
	}
}

// reqDep is a dependency of request req, while the trace is measured.
type reqDep struct {
	req int32
	Dep
}

type depKey struct {
	req  int32
	name string
}

// Measure measures every request of t (ops are its operations, skew the clock skew tolerated
// between services, in ns). Its cost is linear in the spans and calls but for sorting each span's
// children once and a binary search per call.
func Measure(t *analyzer.Trace, ops []*analyzer.Operation, skew int64) []Request {
	var sc Scratch
	return sc.Measure(t, ops, skew)
}

// Measure is Measure in sc's memory.
func (sc *Scratch) Measure(t *analyzer.Trace, ops []*analyzer.Operation, skew int64) []Request {
	return sc.measure(t, ops, skew, false)
}

// retriedNothing reports whether every operation of ops made one first attempt with one call and
// nothing more: then nothing on any request's path failed and was retried, paused or lost a race,
// and no call was a copy (an attempt that is a retry continues an operation of another trace) -
// most traces on a healthy day, measured without walking their paths.
func retriedNothing(ops []*analyzer.Operation) bool {
	for _, o := range ops {
		if len(o.Attempts) != 1 || o.Attempts[0].Kind != analyzer.KindInitial || len(o.Attempts[0].Calls) != 1 {
			return false
		}
	}
	return true
}

// measure is Measure; full walks every request's path even when retriedNothing (the test that
// the shortcut changes no figure sets it).
func (sc *Scratch) measure(t *analyzer.Trace, ops []*analyzer.Operation, skew int64, full bool) []Request {
	n := 0
	for _, r := range t.Roots() {
		if IsRequest(&t.Spans[r]) {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	reqs := sc.reqs[:0]
	rootOf := resize(sc.rootOf, t.Len())
	sc.rootOf = rootOf
	for i := range rootOf {
		rootOf[i] = -1
	}
	for _, r := range t.Roots() {
		if !IsRequest(&t.Spans[r]) {
			continue
		}
		k := int32(len(reqs))
		rootOf[r] = k
		t.Walk(int(r), func(j int) bool { rootOf[j] = k; return true })
		s := &t.Spans[r]
		reqs = append(reqs, Request{Service: s.Service(), Name: s.Name, StartUnixNano: t.Start(int(r)),
			EndUnixNano: t.End(int(r)), Probability: Probability(t, int(r))})
	}
	walk := full || !retriedNothing(ops)
	m := &sc.m
	if walk {
		m.reset(t, ops)
		defer m.release()
	}
	sc.deps = sc.deps[:0]
	clear(sc.many)
	useMap := false
	// A request calls a few dependencies, found by a scan; one that calls many (a fan-out over
	// thousands of origins) gets a map, so that no trace costs the square of its width.
	dep := func(req int32, name string) *Dep {
		if useMap {
			if k, ok := sc.many[depKey{req, name}]; ok {
				return &sc.deps[k].Dep
			}
		} else {
			for i := range sc.deps {
				if d := &sc.deps[i]; d.req == req && d.Dependency == name {
					return &d.Dep
				}
			}
		}
		sc.deps = append(sc.deps, reqDep{req: req, Dep: Dep{Dependency: name}})
		if !useMap && len(sc.deps) > 16 {
			useMap = true
			if sc.many == nil {
				sc.many = map[depKey]int32{}
			}
			for i := range sc.deps {
				sc.many[depKey{sc.deps[i].req, sc.deps[i].Dependency}] = int32(i)
			}
		} else if useMap {
			sc.many[depKey{req, name}] = int32(len(sc.deps) - 1)
		}
		return &sc.deps[len(sc.deps)-1].Dep
	}
	for _, o := range ops {
		for i := range o.Attempts {
			for _, id := range o.Attempts[i].Calls {
				j, ok := t.Lookup(id)
				if !ok || rootOf[j] < 0 {
					continue
				}
				d := dep(rootOf[j], o.Dependency)
				d.Calls++
				if walk && m.copied[j] {
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
		if k < 0 || !IsRequest(&t.Spans[r]) {
			continue
		}
		q := &reqs[k]
		if !walk {
			q.Parts.Rest = q.EndUnixNano - q.StartUnixNano // the whole path is the rest
			continue
		}
		m.path(int(r))
		for _, s := range m.segs {
			q.Parts.add(s)
			if s.Op < 0 {
				continue
			}
			d := dep(k, ops[s.Op].Dependency)
			if s.Part == PartHedge {
				d.Hedged += s.To - s.From
			} else {
				d.Added += s.To - s.From
			}
		}
	}
	// The requests' dependencies, in one array, each request's by name.
	slices.SortFunc(sc.deps, func(a, b reqDep) int {
		if c := cmp.Compare(a.req, b.req); c != 0 {
			return c
		}
		return strings.Compare(a.Dependency, b.Dependency)
	})
	out, all := result(len(reqs), len(sc.deps))
	copy(out, reqs)
	for i := range sc.deps {
		all[i] = sc.deps[i].Dep
	}
	for i := 0; i < len(sc.deps); {
		j := i
		for j < len(sc.deps) && sc.deps[j].req == sc.deps[i].req {
			j++
		}
		out[sc.deps[i].req].Deps = all[i:j:j]
		i = j
	}
	clear(reqs) // no names of this trace kept
	sc.reqs = reqs[:0]
	clear(sc.deps)
	sc.deps = sc.deps[:0]
	clear(sc.many)
	return out
}

// result makes what measure returns: n requests and the m dependencies they share out. Most
// traces are one request calling a few dependencies: those get both in one allocation, which
// costs no more memory than two (the sizes round to the same classes), and the two are kept
// and dropped together anyway, with the trace's result.
func result(n, m int) ([]Request, []Dep) {
	if n == 1 {
		switch {
		case m == 0:
			return make([]Request, 1), nil
		case m == 1:
			b := new(struct {
				r [1]Request
				d [1]Dep
			})
			return b.r[:], b.d[:]
		case m == 2:
			b := new(struct {
				r [1]Request
				d [2]Dep
			})
			return b.r[:], b.d[:]
		case m <= 4:
			b := new(struct {
				r [1]Request
				d [4]Dep
			})
			return b.r[:], b.d[:m:m]
		}
	}
	return make([]Request, n), make([]Dep, m)
}
