package engine

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/spans"
)

// The report: what every published analysis contributes (counts per dependency and caller,
// findings, costs, data issues), taken back when the trace is analyzed again, and the Report made
// from it with its notes. Evicted and forgotten traces leave their contribution here.

type depAgg struct {
	service string
	// origins counts physical calls per address (scheme://host:port), at most maxOrigins of
	// them; the calls to addresses past those are originsOver's.
	origins     map[string]int
	originsOver int
	physical    int
	logical     int
	outcomes    map[string]int
	byCaller    map[string]*callerAgg
}

type callerAgg struct {
	physical, logical int
	outcomes          map[string]int
}

type findingRec struct {
	trace spans.TraceID
	f     analyzer.Finding
}

// contribute adds (sign +1) or takes back (-1) the counts and findings of trace id's analysis r;
// n is the number of spans it was made from and is the data issues its trace found (r may be held
// without its trace: see hold).
func (a *Engine) contribute(r *traceResult, id spans.TraceID, n int, is traceIssues, sign int) {
	a.inSpans += sign * n
	a.inOps += sign * r.nOps
	a.issues.add(is, sign)
	a.costs.Add(r.costs, sign)
	// The accounting was made with the analysis (outside the lock): adding it is a few map updates.
	for i := range r.acct {
		row := &r.acct[i]
		g := a.deps[row.dep]
		if g == nil {
			g = &depAgg{outcomes: map[string]int{}, byCaller: map[string]*callerAgg{}}
			a.deps[row.dep] = g
		}
		// A dependency has one service.name at most (it is named by it when there is one); the
		// smallest is kept all the same, so the report never depends on the order of traces.
		if row.service != "" && (g.service == "" || row.service < g.service) {
			g.service = row.service
		}
		p, l := sign*int(row.physical), sign*int(row.logical)
		g.addOrigin(row.origin, p)
		g.physical += p
		g.logical += l
		if g.outcomes[row.status] += p; g.outcomes[row.status] <= 0 {
			delete(g.outcomes, row.status)
		}
		c := g.byCaller[row.caller]
		if c == nil {
			c = &callerAgg{outcomes: map[string]int{}}
			g.byCaller[row.caller] = c
		}
		c.physical += p
		c.logical += l
		if c.outcomes[row.status] += p; c.outcomes[row.status] <= 0 {
			delete(c.outcomes, row.status)
		}
		if c.physical <= 0 && c.logical <= 0 {
			delete(g.byCaller, row.caller)
		}
		if g.physical <= 0 && g.logical <= 0 {
			delete(a.deps, row.dep)
		}
	}
	for _, e := range r.errs {
		a.detErrs[e] = true
	}
	if sign > 0 {
		for _, f := range r.findings {
			a.findings = append(a.findings, findingRec{id, f})
		}
		// Dropped in chunks of a quarter, so a full list costs amortized O(1) per finding.
		if m := a.maxFindings(); m > 0 && len(a.findings) > m+m/4 {
			over := len(a.findings) - m
			a.droppedFind += over
			a.findings = slices.Delete(a.findings, 0, over)
		}
	} else if len(r.findings) > 0 {
		a.findings = slices.DeleteFunc(a.findings, func(fr findingRec) bool { return fr.trace == id })
	}
}

// Report is the report over everything analyzed so far (held and evicted traces).
func (a *Engine) Report() analyzer.Report {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.report()
}

func (a *Engine) report() analyzer.Report {
	r := analyzer.Report{
		Version:      analyzer.ReportVersion,
		Input:        analyzer.InputStats{Spans: a.inSpans, Traces: a.inTraces, Operations: a.inOps},
		Dependencies: []analyzer.DependencyStats{},
		Findings:     make([]analyzer.Finding, 0, len(a.findings)+len(a.chunkFindings)+len(a.windowFindings)),
	}
	for dep, g := range a.deps {
		ds := analyzer.DependencyStats{Dependency: dep, Service: g.service, PhysicalCalls: g.physical,
			LogicalOperations: g.logical, Outcomes: make(map[string]int, len(g.outcomes))}
		if g.logical > 0 {
			ds.Amplification = float64(g.physical) / float64(g.logical)
		}
		ds.Origins, ds.MoreOrigins = g.listOrigins()
		for k, v := range g.outcomes {
			ds.Outcomes[k] = v
		}
		ds.ByCaller = make([]analyzer.CallerStats, 0, len(g.byCaller))
		for name, c := range g.byCaller {
			if name != "" && c.physical > 0 {
				ds.Callers = append(ds.Callers, name)
			}
			cs := analyzer.CallerStats{Caller: name, PhysicalCalls: c.physical, LogicalOperations: c.logical,
				Outcomes: make(map[string]int, len(c.outcomes))}
			if c.logical > 0 {
				cs.Amplification = float64(c.physical) / float64(c.logical)
			}
			for k, v := range c.outcomes {
				cs.Outcomes[k] = v
			}
			ds.ByCaller = append(ds.ByCaller, cs)
		}
		sort.Strings(ds.Callers)
		slices.SortFunc(ds.ByCaller, func(x, y analyzer.CallerStats) int {
			if c := cmp.Compare(y.PhysicalCalls, x.PhysicalCalls); c != 0 {
				return c
			}
			return cmp.Compare(x.Caller, y.Caller)
		})
		r.Dependencies = append(r.Dependencies, ds)
	}
	slices.SortFunc(r.Dependencies, func(x, y analyzer.DependencyStats) int {
		if c := cmp.Compare(y.Amplification, x.Amplification); c != 0 {
			return c
		}
		if c := cmp.Compare(y.PhysicalCalls, x.PhysicalCalls); c != 0 {
			return c
		}
		return cmp.Compare(x.Dependency, y.Dependency)
	})
	for _, fr := range a.findings {
		r.Findings = append(r.Findings, fr.f)
	}
	r.Findings = append(r.Findings, a.chunkFindings...)
	r.Findings = append(r.Findings, a.windowFindings...)
	sortFindings(r.Findings)
	r.Groups = analyzer.GroupFindings(r.Findings)
	r.Costs = a.costs.Entries()
	r.Notes = a.notes()
	return r
}

func (a *Engine) notes() []string {
	// Never nil: the JSON report always carries its notes, empty when there is nothing to say.
	notes := []string{}
	add := func(n int, format string, args ...any) {
		if n > 0 {
			notes = append(notes, fmt.Sprintf(format, append([]any{n}, args...)...))
		}
	}
	is := a.issues
	is.shapeNotes(func(n int, note string) { add(n, note) })
	add(a.zeroTimes, "%d spans have a start or end time of 0 (not set by their exporter): their timing is meaningless")
	add(a.futureTimes, "%d spans have times more than a day ahead of the clock (a host's clock or an exporter is wrong): their timing is meaningless")
	add(a.truncatedT, "%d traces hit the per-trace cap of %d spans and were truncated (%d spans dropped)", a.maxTraceSpans(), a.truncatedS)
	add(a.evictedT, "%d traces (%d spans) were evicted by the span bound (--max-spans %d) before their last spans could arrive; they were analyzed as they were", a.evictedS, a.maxSpans())
	is.splitNotes(func(n int, note string) { add(n, note) })
	is.inferredNotes(func(n int, note string) { add(n, note) })
	add(a.lateFragments, "%d traces received spans after they had been analyzed and released (the settle period was too short for them); the late spans were analyzed on their own, so their chains may be cut")
	add(a.droppedFind, "%d older findings dropped (more than %d held)", a.maxFindings())
	add(a.win.dropped, "%d operations left the windowed detectors' window before it ended (more than %d held at once): those detectors judged the latest ones", a.win.max)
	if a.win.chunks > 0 {
		bound := ""
		if a.cfg.MaxWindowOps == 0 {
			bound = " (a quarter of --max-spans)"
		}
		notes = append(notes, fmt.Sprintf("the windowed detectors judged the input in %d chunks of at most %d operations%s, one after another: each of their findings covers its chunk's time (window_start to window_end)", a.win.chunks+1, a.win.max, bound))
	}
	add(a.forgotten, "%d analyzed traces were forgotten once the recording had moved %s past their last span: spans of theirs arriving later would count as traces of their own", time.Duration(a.cfg.settle())+a.cfg.ForgetAfter)
	add(a.rejected, "%d spans rejected while decoding (invalid ids)")
	errs := make([]string, 0, len(a.detErrs))
	for e := range a.detErrs {
		errs = append(errs, e)
	}
	sort.Strings(errs)
	notes = append(notes, errs...)
	return notes
}
