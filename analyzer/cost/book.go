package cost

import (
	"cmp"
	"math"
	"slices"

	"github.com/stormwatch/stormwatch/analyzer"
)

// Book adds up requests' costs per entry point and per dependency. Requests are added and taken
// back (a trace analyzed again with late spans replaces its first analysis), so every figure is a
// sum, and the percentiles come from a histogram of counts and sums per bucket: exact when the
// values of a bucket are equal, within half a percent otherwise. The zero value is ready.
type Book struct {
	entries map[bookKey]*tally
	// first and last bound the time the rates are over: the earliest start and the latest end
	// of any request added (never narrowed when one is taken back).
	first, last int64
}

type bookKey struct {
	kind                int8 // 0 entry point, 1 dependency
	service, name, dept string
}

type tally struct {
	requests int
	known    int     // requests whose sampling probability is known
	weight   float64 // requests scaled by their sampling probability
	duration int64   // the requests' time, ns
	added    int64   // failed + pause time, ns
	hedged   int64
	hist     map[int32]bucket // of added latency per request
	extra    int
	extraW   float64
	late     int64
}

type bucket struct {
	n   int
	sum int64
}

// Add adds (sign 1) or takes back (sign -1) the requests' costs.
func (b *Book) Add(reqs []Request, sign int) {
	if len(reqs) == 0 {
		return
	}
	if b.entries == nil {
		b.entries = map[bookKey]*tally{}
	}
	for i := range reqs {
		q := &reqs[i]
		if sign > 0 {
			if b.first == 0 || q.StartUnixNano < b.first {
				b.first = q.StartUnixNano
			}
			b.last = max(b.last, q.EndUnixNano)
		}
		w := 1.0
		if q.Probability > 0 {
			w = 1 / q.Probability
		}
		var extra int
		var late int64
		for _, d := range q.Deps {
			extra += d.Extra
			late += d.LateNanos
		}
		dur := q.EndUnixNano - q.StartUnixNano
		b.add(bookKey{service: q.Service, name: q.Name}, sign, q.Probability > 0, w, dur, q.Parts.Added(), q.Parts.Hedged, extra, late)
		for _, d := range q.Deps {
			b.add(bookKey{kind: 1, dept: d.Dependency}, sign, q.Probability > 0, w, dur, d.Added, d.Hedged, d.Extra, d.LateNanos)
		}
	}
}

func (b *Book) add(k bookKey, sign int, known bool, w float64, dur, added, hedged int64, extra int, late int64) {
	t := b.entries[k]
	if t == nil {
		t = &tally{hist: map[int32]bucket{}}
		b.entries[k] = t
	}
	s := int64(sign)
	t.requests += sign
	if known {
		t.known += sign
	}
	t.weight += float64(sign) * w
	t.duration += s * dur
	t.added += s * added
	t.hedged += s * hedged
	t.extra += sign * extra
	t.extraW += float64(sign*extra) * w
	t.late += s * late
	h := bucketOf(added)
	bk := t.hist[h]
	bk.n += sign
	bk.sum += s * added
	if bk.n <= 0 {
		delete(t.hist, h)
	} else {
		t.hist[h] = bk
	}
	if t.requests <= 0 {
		delete(b.entries, k)
	}
}

// bucketOf is the histogram bucket of a latency: 0 for none, then buckets of 1% width from 1 µs
// (everything under 1 µs in the first).
func bucketOf(ns int64) int32 {
	if ns <= 0 {
		return 0
	}
	us := float64(ns) / 1e3
	if us < 1 {
		return 1
	}
	return 2 + int32(math.Log(us)/math.Log(1.01))
}

// Entries are the book's figures, entry points first, then dependencies, each by total added
// latency (most first), then by name.
func (b *Book) Entries() []analyzer.CostEntry {
	out := make([]analyzer.CostEntry, 0, len(b.entries))
	secs := float64(b.last-b.first) / 1e9
	for k, t := range b.entries {
		e := analyzer.CostEntry{Kind: analyzer.CostEntryPoint, Service: k.service, Name: k.name, Requests: t.requests,
			ExtraCalls: t.extra, LateWorkSeconds: round(float64(t.late)/1e9, 6), HedgeMs: round(float64(t.hedged)/1e6, 3),
			Seconds: round(secs, 3)}
		if k.kind == 1 {
			e.Kind, e.Dependency = analyzer.CostDependency, k.dept
		}
		if t.duration > 0 {
			e.RetryShare = round(float64(t.added)/float64(t.duration), 4)
		}
		e.AddedLatencyMs = t.latency()
		e.AddedLatencyBuckets = t.buckets()
		if secs > 0 {
			e.RequestsPerSecond = round(t.weight/secs, 3)
			e.ExtraCallsPerSecond = round(t.extraW/secs, 3)
		}
		switch {
		case t.known == t.requests:
			e.Sampling = analyzer.SamplingKnown
		case t.known > 0:
			e.Sampling = analyzer.SamplingPartly
		default:
			e.Sampling = analyzer.SamplingUnknown
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(x, y analyzer.CostEntry) int {
		return cmp.Or(
			boolOrder(x.Kind != analyzer.CostEntryPoint, y.Kind != analyzer.CostEntryPoint), // entry points first
			cmp.Compare(y.AddedLatencyMs.Total, x.AddedLatencyMs.Total),
			cmp.Compare(x.Service, y.Service),
			cmp.Compare(x.Name, y.Name),
			cmp.Compare(x.Dependency, y.Dependency))
	})
	return out
}

func boolOrder(x, y bool) int {
	if x == y {
		return 0
	}
	if !x {
		return -1
	}
	return 1
}

// latency is the tally's added latency per request: nearest-rank percentiles over the
// histogram, each the mean of its bucket's values.
func (t *tally) latency() analyzer.LatencySummary {
	keys := make([]int32, 0, len(t.hist))
	n := 0
	for k, bk := range t.hist {
		keys = append(keys, k)
		n += bk.n
	}
	slices.Sort(keys)
	at := func(p float64) float64 {
		rank := int(math.Ceil(p * float64(n)))
		rank = max(rank, 1)
		seen := 0
		for _, k := range keys {
			bk := t.hist[k]
			if seen += bk.n; seen >= rank {
				return float64(bk.sum) / float64(bk.n) / 1e6
			}
		}
		return 0
	}
	if n == 0 {
		return analyzer.LatencySummary{}
	}
	return analyzer.LatencySummary{P50: round(at(0.5), 3), P99: round(at(0.99), 3), Total: round(float64(t.added)/1e6, 3)}
}

// buckets counts the requests at or under each of analyzer.AddedLatencyBoundsMs, placing each
// histogram bucket by the mean of its values.
func (t *tally) buckets() []uint64 {
	out := make([]uint64, len(analyzer.AddedLatencyBoundsMs))
	for _, bk := range t.hist {
		ms := float64(bk.sum) / float64(bk.n) / 1e6
		for i, b := range analyzer.AddedLatencyBoundsMs {
			if ms <= b {
				out[i] += uint64(bk.n)
			}
		}
	}
	return out
}

// round keeps d decimals: the report's figures are read by people and compared by diff, and the
// last bits of a float would differ between equal analyses made in another order.
func round(v float64, d int) float64 {
	p := math.Pow(10, float64(d))
	return math.Round(v*p) / p
}
