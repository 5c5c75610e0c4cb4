package synchronizedretries

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/passes/internal/audit"
	"github.com/stormwatch/stormwatch/analyzer/policy"
	"github.com/stormwatch/stormwatch/internal/words"
	"github.com/stormwatch/stormwatch/spans"
)

const name = "synchronized-retries"

// Detector is the synchronized-retries detector.
var Detector = &analyzer.Detector{
	Name:     name,
	Title:    "Retries in lockstep (no jitter)",
	Doc:      "pauses before the n-th retry identical across operations (coefficient of variation at or under maxCV, default 0.05), or retry starts bunched in waves; full jitter is never reported; evidence: retry, samples, mean_pause_ms, cv, callers, waves, largest_wave, wave_starts",
	Scope:    analyzer.ScopeWindow,
	Severity: analyzer.SeverityWarning,
	Settings: &Settings{MaxCV: 0.05, MinSamples: 8},
	Run:      run,
}

// Settings are synchronized-retries' own (analyzer.Detector.Settings).
type Settings struct {
	// MaxCV is the coefficient of variation at or under which pauses are in lockstep. 0.05
	// catches fixed pauses and a token jitter of a few percent; equal jitter is near 0.19.
	MaxCV float64 `policy:"maxCV" doc:"pauses whose coefficient of variation is at or under it have no jitter" min:"0" max:"1"`
	// MinSamples is the fewest pauses, from as many traces, a retry ordinal needs (and the
	// smallest wave) before it is judged.
	MinSamples int `policy:"minSamples" doc:"pauses (from as many traces) needed before a retry ordinal or a wave is judged" min:"1"`
}

// stats is a running mean and variance (Welford), so a group costs the same at any size.
type stats struct {
	n       int
	mean, m float64
	callers []string
	traces  audit.TraceSet // up to minSamples
	example *analyzer.Operation
	ids     []spans.SpanID // a few of the retries, for the finding
}

func (s *stats) add(x float64) {
	s.n++
	d := x - s.mean
	s.mean += d / float64(s.n)
	s.m += d * (x - s.mean)
}

func (s *stats) cv() float64 {
	if s.n < 2 || s.mean <= 0 {
		return math.Inf(1)
	}
	return math.Sqrt(s.m/float64(s.n)) / s.mean
}

// dependency is what the retries toward one dependency add up to.
type dependency struct {
	// ords[n-1] are the pauses before the n-th retry of each operation (nil when none).
	ords   []*stats
	starts []int64        // the retries' start times
	traces audit.TraceSet // up to minSamples
	// cls is the policy class of the first operation seen toward it, whose backoff the advice
	// quotes.
	cls *policy.Class
	// ids are the traces whose retries were counted, the first audit.MaxTraceIDs of them.
	ids []spans.TraceID
}

func run(pass *analyzer.Pass) error {
	set := analyzer.SettingsOf[Settings](pass)
	w := audit.Windowed(pass)
	// A count of the whole traffic: a sampled window holds its share of it.
	maxCV, minSamples := set.MaxCV, audit.SampledCount(w.Ops, set.MinSamples)
	p := audit.Policy(pass.RunSettings)
	deps := map[string]*dependency{}
	for _, op := range w.Ops {
		var dep *dependency // one lookup per operation, at its first retry
		n := 0
		for i := range op.Attempts {
			a := &op.Attempts[i]
			if !audit.IsRetry(a) {
				continue
			}
			n++
			if a.BackoffNanos < 0 {
				continue // not measured: seen only on callees with clocks of their own
			}
			if dep == nil {
				cls := audit.Class(p, op)
				if audit.NoRetries(cls) {
					break // no retry is allowed here at all: how they are paced is beside the point
				}
				if dep = deps[op.Dependency]; dep == nil {
					dep = &dependency{cls: cls}
					deps[op.Dependency] = dep
				}
			}
			for len(dep.ords) < n {
				dep.ords = append(dep.ords, nil)
			}
			g := dep.ords[n-1]
			if g == nil {
				g = &stats{example: op}
				dep.ords[n-1] = g
			}
			g.add(float64(a.BackoffNanos))
			if len(g.ids) < 5 {
				g.ids = append(g.ids, a.SpanID)
			}
			if g.traces.Len() < minSamples {
				g.traces.Add(op.TraceID)
			}
			if !slices.Contains(g.callers, op.Caller) && len(g.callers) < 10 {
				g.callers = append(g.callers, op.Caller)
			}
			dep.starts = append(dep.starts, a.StartUnixNano)
			if n := len(dep.ids); n < audit.MaxTraceIDs && (n == 0 || dep.ids[n-1] != op.TraceID) && !slices.Contains(dep.ids, op.TraceID) {
				dep.ids = append(dep.ids, op.TraceID)
			}
			if dep.traces.Len() < minSamples {
				dep.traces.Add(op.TraceID)
			}
		}
	}
	depNames := make([]string, 0, len(deps))
	for d := range deps {
		depNames = append(depNames, d)
	}
	slices.Sort(depNames)
	for _, depName := range depNames {
		dep := deps[depName]
		// The most uniform qualifying ordinal (the first of equals).
		var g *stats
		retry := 0
		for i, o := range dep.ords {
			// Too few to judge; or the copies of one request made by the layers above (one trace),
			// not independent clients; or no pause at all (no-backoff's finding).
			if o == nil || o.n < minSamples || o.traces.Len() < minSamples || o.mean <= float64(time.Millisecond) {
				continue
			}
			if g == nil || o.cv() < g.cv() {
				g, retry = o, i+1
			}
		}
		waves := findWaves(dep.starts, g, minSamples)
		lockstep := g != nil && g.cv() <= maxCV
		// A wave is a herd only when independent requests (traces) make it.
		bunched := len(waves) > 0 && largest(waves) >= minSamples && 2*largest(waves) >= len(dep.starts) &&
			dep.traces.Len() >= minSamples
		if !lockstep && !bunched {
			continue
		}
		ev := analyzer.Evidence{"waves": analyzer.Int(len(waves)), "largest_wave": analyzer.Int(largest(waves))}
		var ws []string
		for i, wv := range waves {
			if i == 5 {
				break
			}
			ws = append(ws, time.Unix(0, wv.start).UTC().Format(time.RFC3339Nano))
		}
		ev["wave_starts"] = analyzer.Texts(ws)
		summary := ""
		f := analyzer.Finding{Severity: pass.Detector.Severity, Dependency: depName}
		if g != nil {
			ev["retry"] = analyzer.Int(retry)
			ev["samples"] = analyzer.Int(g.n)
			ev["mean_pause_ms"] = analyzer.Float(audit.Ms(int64(g.mean)))
			ev["cv"] = analyzer.Float(math.Round(g.cv()*1000) / 1000)
			ev["callers"] = analyzer.Texts(slices.Sorted(slices.Values(g.callers)))
			f.Service = g.example.Caller
			f.TraceID = g.example.TraceID.String()
			f.SpanIDs = audit.HexIDs(g.ids)
			summary = fmt.Sprintf("retry %d toward %s waited %.0f ms in %s with a coefficient of variation of %.3f: no jitter",
				retry, depName, audit.Ms(int64(g.mean)), words.Count(g.n, "operation"), g.cv())
		}
		if bunched {
			if summary != "" {
				summary += "; "
			}
			summary += fmt.Sprintf("%d of %s arrived in one wave", largest(waves), words.Plural(len(dep.starts), "retry", "retries"))
		}
		w.Evidence(ev)
		audit.TraceIDs(ev, dep.ids)
		f.Summary = summary
		f.Action = jitterAdvice(dep.cls)
		f.Evidence = ev
		pass.Report(f)
	}
	return nil
}

type wave struct {
	start int64
	size  int
}

// findWaves bunches retry start times: a wave is a stretch of width W (1% of the typical pause,
// at least 1 ms) holding at least minSamples retries and a tenth of all of them. Measuring density
// rather than chaining neighbours keeps heavy but well-jittered traffic (thousands of retries
// spread evenly) from reading as one long wave.
func findWaves(ts []int64, g *stats, minSamples int) []wave {
	width := int64(time.Millisecond)
	if g != nil {
		width = max(width, int64(g.mean/100))
	}
	slices.Sort(ts)
	need := max(minSamples, (len(ts)+9)/10)
	var out []wave
	hi := 0 // only moves forward: linear in the retries
	for lo := 0; lo < len(ts); {
		hi = max(hi, lo+1)
		for hi < len(ts) && ts[hi]-ts[lo] <= width {
			hi++
		}
		if hi-lo >= need {
			out = append(out, wave{ts[lo], hi - lo})
			lo = hi
			continue
		}
		lo++
	}
	slices.SortStableFunc(out, func(a, b wave) int { return cmp.Compare(b.size, a.size) })
	return out
}

func largest(ws []wave) int {
	if len(ws) == 0 {
		return 0
	}
	return ws[0].size
}

// jitterAdvice asks for jitter in the words of the policy in force: the class's declared jitter
// when the file sets a backoff with one, a change of the policy when it declares none.
func jitterAdvice(c *policy.Class) string {
	const why = ", so refused clients come back spread out instead of together"
	if c == nil || !audit.FromFile(c.Backoff) {
		return "add full jitter to the backoff: sleep uniform(0, min(cap, base*2^n))" + why
	}
	b, at := c.Backoff.Value, c.Backoff.Pos.FileLine()
	switch b.Jitter {
	case policy.JitterNone:
		return "the policy's backoff has no jitter (" + at + "): make it jitter: full there and in the client, sleep uniform(0, min(cap, base*2^n))" + why
	case "":
		return fmt.Sprintf("apply the policy's jitter (+-%g%% at %s) to every pause in the client", b.JitterRatio*100, at) + why
	}
	return "apply the policy's " + b.Jitter + " jitter (" + at + ") to every pause in the client" + why
}
