package stormwatchconnector

import (
	"encoding/hex"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
)

// scopeName is the instrumentation scope of everything the connector emits.
const scopeName = "github.com/stormwatch/stormwatch/otelcol/stormwatchconnector"

// Metric and attribute names: the contract documented in docs/scale.md. They follow the
// OpenTelemetry naming rules (dotted namespace, no unit or _total in the name, units in UCUM
// annotations), so the Prometheus exporter turns them into the single binary's series names.
const (
	metricPhysicalCalls = "stormwatch.dependency.physical_calls"
	metricLogicalOps    = "stormwatch.dependency.logical_operations"
	metricAmplification = "stormwatch.dependency.amplification"
	metricAttempts      = "stormwatch.dependency.attempts"
	// Per (caller service, dependency): the same figures split by who called.
	metricCallerPhysical = "stormwatch.caller.physical_calls"
	metricCallerLogical  = "stormwatch.caller.logical_operations"
	metricCallerAmp      = "stormwatch.caller.amplification"
	metricFindings       = "stormwatch.findings"
	metricSpansAnalyzed  = "stormwatch.analyzed.spans"
	metricTracesAnalyzed = "stormwatch.analyzed.traces"
	metricOperations     = "stormwatch.analyzed.operations"
	metricHeldSpans      = "stormwatch.held_spans"
	metricHeldTraces     = "stormwatch.held_traces"
	metricPendingTraces  = "stormwatch.pending_traces"
	metricEvictedSpans   = "stormwatch.evicted_spans"
	metricEvictedTraces  = "stormwatch.evicted_traces"
	// What retries cost (the report's costs): per entry point and per dependency.
	metricEntryAddedLatency = "stormwatch.entry.added_latency"
	metricDepAddedLatency   = "stormwatch.dependency.added_latency"
	metricDepExtraCalls     = "stormwatch.dependency.extra_calls"
	metricDepLateWork       = "stormwatch.dependency.late_work"
	metricWindowRun         = "stormwatch.window.run"
	metricWindowInterval    = "stormwatch.window.interval"

	attrDependency        = "stormwatch.dependency"
	attrDependencyService = "stormwatch.dependency.service"
	attrOutcome           = "stormwatch.attempt.outcome"
	attrCaller            = "stormwatch.caller"
	attrEntryService      = "stormwatch.entry.service"
	attrEntryName         = "stormwatch.entry.name"
	attrDetector          = "stormwatch.finding.detector"
	attrSeverity          = "stormwatch.finding.severity"
	attrService           = "stormwatch.finding.service"
	attrAction            = "stormwatch.finding.action"
	attrSpanIDs           = "stormwatch.finding.span_ids"
	attrEvidencePrefix    = "stormwatch.finding.evidence."

	// eventFinding names each finding log record (LogRecord.EventName).
	eventFinding = "stormwatch.finding"
)

// emitter turns the analyzer's cumulative report into pdata: every emission carries every
// dependency's running totals (cumulative temporality, so a lost export costs nothing but
// latency) and a log record for each finding not sent before.
type emitter struct {
	an       *engine.Engine
	resource pcommon.Resource
	version  string
	start    pcommon.Timestamp

	mu sync.Mutex
	// findings counts the findings first seen, as the live metrics count them; logged are those
	// delivered as log records, by key, with the content sent (a re-analysis that changes a
	// finding's summary, severity or spans sends it again).
	findings *analyzer.FindingCounter
	logged   map[analyzer.FindingKey]string
}

// content is what a finding says: when it changes under the same key, the record is sent again.
func content(f *analyzer.Finding) string {
	return f.Severity.String() + "\x00" + f.Summary + "\x00" + strings.Join(f.SpanIDs, ",")
}

func newEmitter(set connector.Settings, an *engine.Engine, detectors []*analyzer.Detector, start time.Time) *emitter {
	// The collector's own resource (service.name, service.instance.id) identifies the backend
	// that computed the figures, so series from several backends do not collide when they are
	// pushed to one metrics backend.
	res := pcommon.NewResource()
	if set.Resource != (pcommon.Resource{}) {
		set.Resource.CopyTo(res)
	}
	return &emitter{
		an:       an,
		resource: res,
		version:  set.BuildInfo.Version,
		start:    pcommon.NewTimestampFromTime(start),
		findings: analyzer.NewFindingCounter(detectors),
		logged:   map[analyzer.FindingKey]string{},
	}
}

// output is one emission; pending are the finding records it carries, marked logged once the
// logs consumer accepted them.
type output struct {
	metrics pmetric.Metrics
	logs    plog.Logs
	pending map[analyzer.FindingKey]string
}

func (e *emitter) collect(now time.Time, wantMetrics, wantLogs bool) output {
	rep := e.an.Report()
	stats := e.an.Stats()
	ts := pcommon.NewTimestampFromTime(now)

	e.mu.Lock()
	defer e.mu.Unlock()
	out := output{logs: plog.NewLogs()}
	keys := e.findings.Count(rep.Findings)
	var sl plog.ScopeLogs
	for i := range rep.Findings {
		if !wantLogs {
			break // Count has counted them; what follows is the log records
		}
		f, k := &rep.Findings[i], keys[i]
		said := content(f)
		if e.logged[k] == said {
			continue
		}
		if out.pending == nil {
			rl := out.logs.ResourceLogs().AppendEmpty()
			e.resource.CopyTo(rl.Resource())
			sl = rl.ScopeLogs().AppendEmpty()
			sl.Scope().SetName(scopeName)
			sl.Scope().SetVersion(e.version)
			out.pending = map[analyzer.FindingKey]string{}
		}
		findingRecord(sl.LogRecords().AppendEmpty(), f, ts)
		out.pending[k] = said
	}
	// Findings that left the report (older than max_findings, or replaced by a re-analysis)
	// will not come back under the same key; forgetting them keeps the set bounded.
	cur := make(map[analyzer.FindingKey]bool, len(keys))
	for _, k := range keys {
		cur[k] = true
	}
	for k := range e.logged {
		if !cur[k] {
			delete(e.logged, k)
		}
	}
	if wantMetrics {
		out.metrics = e.metrics(&rep, stats, ts)
	}
	return out
}

// setStart stamps the start of the cumulative series: the connector's start.
func (e *emitter) setStart(t time.Time) {
	e.mu.Lock()
	e.start = pcommon.NewTimestampFromTime(t)
	e.mu.Unlock()
}

func (e *emitter) delivered(out output) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for k, s := range out.pending {
		e.logged[k] = s
	}
}

func (e *emitter) metrics(rep *analyzer.Report, st engine.StoreStats, ts pcommon.Timestamp) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	e.resource.CopyTo(rm.Resource())
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName(scopeName)
	sm.Scope().SetVersion(e.version)
	ms := sm.Metrics()

	deps := slices.Clone(rep.Dependencies)
	slices.SortFunc(deps, func(a, b analyzer.DependencyStats) int { return strings.Compare(a.Dependency, b.Dependency) })
	depAttrs := func(m pcommon.Map, d *analyzer.DependencyStats) {
		m.PutStr(attrDependency, d.Dependency)
		if d.Service != "" {
			m.PutStr(attrDependencyService, d.Service)
		}
	}

	phys := e.sum(ms, metricPhysicalCalls, "{call}", "Physical calls (CLIENT spans) that reached the dependency, in traces analyzed whole by this instance.")
	logi := e.sum(ms, metricLogicalOps, "{operation}", "Logical operations the top layer asked of the dependency; physical_calls / logical_operations is the amplification.")
	amp := e.gauge(ms, metricAmplification, "1", "Physical calls per logical operation toward the dependency, over everything this instance analyzed. Does not sum across instances: divide the summed counters instead.")
	att := e.sum(ms, metricAttempts, "{attempt}", "Physical calls to the dependency by outcome: the HTTP status, the gRPC code, or a class (ok, timeout, connect error, refused).")
	for i := range deps {
		d := &deps[i]
		dp := e.point(phys, ts)
		depAttrs(dp.Attributes(), d)
		dp.SetIntValue(int64(d.PhysicalCalls))
		dp = e.point(logi, ts)
		depAttrs(dp.Attributes(), d)
		dp.SetIntValue(int64(d.LogicalOperations))
		g := amp.DataPoints().AppendEmpty()
		g.SetTimestamp(ts)
		depAttrs(g.Attributes(), d)
		g.SetDoubleValue(d.Amplification)
		outcomes := make([]string, 0, len(d.Outcomes))
		for o := range d.Outcomes {
			outcomes = append(outcomes, o)
		}
		slices.Sort(outcomes)
		for _, o := range outcomes {
			dp = e.point(att, ts)
			depAttrs(dp.Attributes(), d)
			dp.Attributes().PutStr(attrOutcome, o)
			dp.SetIntValue(int64(d.Outcomes[o]))
		}
	}

	// Per (caller, dependency), in metrics of their own: adding a caller attribute to the
	// dependency series would change what their names have always meant (one series per
	// dependency, as the single binary's /metrics), and a sum over both would count twice.
	cphys := e.sum(ms, metricCallerPhysical, "{call}", "Physical calls (CLIENT spans) the calling service made to the dependency; summed over callers, the dependency's physical_calls.")
	clogi := e.sum(ms, metricCallerLogical, "{operation}", "Logical operations the calling service asked of the dependency (copies made by layers above counted once); summed over callers, the dependency's logical_operations.")
	camp := e.gauge(ms, metricCallerAmp, "1", "Physical calls per logical operation from the calling service to the dependency. Does not sum across instances: divide the summed counters instead.")
	for i := range deps {
		d := &deps[i]
		callers := slices.Clone(d.ByCaller)
		slices.SortFunc(callers, func(a, b analyzer.CallerStats) int { return strings.Compare(a.Caller, b.Caller) })
		for j := range callers {
			c := &callers[j]
			dp := e.point(cphys, ts)
			depAttrs(dp.Attributes(), d)
			dp.Attributes().PutStr(attrCaller, c.Caller)
			dp.SetIntValue(int64(c.PhysicalCalls))
			dp = e.point(clogi, ts)
			depAttrs(dp.Attributes(), d)
			dp.Attributes().PutStr(attrCaller, c.Caller)
			dp.SetIntValue(int64(c.LogicalOperations))
			g := camp.DataPoints().AppendEmpty()
			g.SetTimestamp(ts)
			depAttrs(g.Attributes(), d)
			g.Attributes().PutStr(attrCaller, c.Caller)
			g.SetDoubleValue(c.Amplification)
		}
	}

	e.costs(ms, rep, ts, depAttrs)

	fnd := e.sum(ms, metricFindings, "{finding}", "Distinct findings reported, by detector and severity.")
	for _, ft := range e.findings.Totals() {
		dp := e.point(fnd, ts)
		dp.Attributes().PutStr(attrDetector, ft.Detector)
		dp.Attributes().PutStr(attrSeverity, ft.Severity.String())
		dp.SetIntValue(ft.Count)
	}

	e.point(e.sum(ms, metricSpansAnalyzed, "{span}", "Spans in the traces analyzed (duplicates dropped)."), ts).SetIntValue(int64(rep.Input.Spans))
	e.point(e.sum(ms, metricTracesAnalyzed, "{trace}", "Traces analyzed at least once."), ts).SetIntValue(int64(rep.Input.Traces))
	e.point(e.sum(ms, metricOperations, "{operation}", "Logical operations found in the traces analyzed."), ts).SetIntValue(int64(rep.Input.Operations))
	e.point(e.sum(ms, metricEvictedSpans, "{span}", "Spans evicted, oldest traces first, to stay within max_spans."), ts).SetIntValue(int64(st.EvictedSpans))
	e.point(e.sum(ms, metricEvictedTraces, "{trace}", "Traces evicted to stay within max_spans."), ts).SetIntValue(int64(st.EvictedTraces))
	for _, g := range []struct {
		name, unit, desc string
		v                int
	}{
		{metricHeldSpans, "{span}", "Spans held for analysis (bounded by max_spans).", st.SpansHeld},
		{metricHeldTraces, "{trace}", "Traces held for analysis.", st.TracesHeld},
		{metricPendingTraces, "{trace}", "Traces waiting for their settle period.", st.PendingTraces},
	} {
		dp := e.gauge(ms, g.name, g.unit, g.desc).DataPoints().AppendEmpty()
		dp.SetTimestamp(ts)
		dp.SetIntValue(int64(g.v))
	}
	if st.WindowEvery > 0 {
		// The pacing of the windowed runs: why cross-trace findings come later under load.
		for _, g := range []struct {
			name, desc string
			v          time.Duration
		}{
			{metricWindowRun, "How long the cross-trace detectors' last run over their window took (0 before the first).", st.WindowRun},
			{metricWindowInterval, "The least time from the cross-trace detectors' last run to their next: the window interval, longer after a long run.", st.WindowEvery},
		} {
			dp := e.gauge(ms, g.name, "s", g.desc).DataPoints().AppendEmpty()
			dp.SetTimestamp(ts)
			dp.SetDoubleValue(g.v.Seconds())
		}
	}
	return md
}

// costs emits what retries cost, as the single binary's /metrics does (docs/costs.md): a
// histogram of the latency retries added to each entry point's requests, and per dependency the
// added latency, the extra calls and the work done after callers gave up. All of it as recorded:
// summed over backends, each counts its own share of the traces.
func (e *emitter) costs(ms pmetric.MetricSlice, rep *analyzer.Report, ts pcommon.Timestamp, depAttrs func(pcommon.Map, *analyzer.DependencyStats)) {
	dep := make(map[string]*analyzer.DependencyStats, len(rep.Dependencies))
	for i := range rep.Dependencies {
		dep[rep.Dependencies[i].Dependency] = &rep.Dependencies[i]
	}
	hist := ms.AppendEmpty()
	hist.SetName(metricEntryAddedLatency)
	hist.SetUnit("s")
	hist.SetDescription("Latency retries added to each request of the entry point: the time its critical path spent in failed attempts that were retried and in pauses between attempts.")
	h := hist.SetEmptyHistogram()
	h.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	added := e.sum(ms, metricDepAddedLatency, "s", "Latency that retries toward the dependency added to requests, summed over the requests analyzed.")
	extra := e.sum(ms, metricDepExtraCalls, "{call}", "Calls to the dependency made by retries and hedges, or inside copies that retries of layers above made, as recorded.")
	late := e.sum(ms, metricDepLateWork, "s", "Span-seconds the dependency worked after its callers had given up (their CLIENT span ended), as recorded.")
	entries := 0
	for i := range rep.Costs {
		c := &rep.Costs[i]
		switch c.Kind {
		case analyzer.CostEntryPoint:
			if entries++; entries > analyzer.MaxEntrySeries {
				continue
			}
			dp := h.DataPoints().AppendEmpty()
			dp.SetStartTimestamp(e.start)
			dp.SetTimestamp(ts)
			dp.Attributes().PutStr(attrEntryService, c.Service)
			dp.Attributes().PutStr(attrEntryName, c.Name)
			dp.SetCount(uint64(c.Requests))
			dp.SetSum(c.AddedLatencyMs.Total / 1000)
			dp.ExplicitBounds().EnsureCapacity(len(analyzer.AddedLatencyBoundsMs))
			for _, b := range analyzer.AddedLatencyBoundsMs {
				dp.ExplicitBounds().Append(b / 1000)
			}
			// The report counts cumulatively (requests at or under each bound, as Prometheus
			// does); OTLP counts each bucket apart, with one more for above the last bound.
			var below uint64
			for _, n := range c.AddedLatencyBuckets {
				dp.BucketCounts().Append(n - below)
				below = n
			}
			dp.BucketCounts().Append(uint64(c.Requests) - below)
		case analyzer.CostDependency:
			d, ok := dep[c.Dependency]
			if !ok {
				d = &analyzer.DependencyStats{Dependency: c.Dependency}
			}
			p := e.point(added, ts)
			depAttrs(p.Attributes(), d)
			p.SetDoubleValue(c.AddedLatencyMs.Total / 1000)
			p = e.point(extra, ts)
			depAttrs(p.Attributes(), d)
			p.SetIntValue(int64(c.ExtraCalls))
			p = e.point(late, ts)
			depAttrs(p.Attributes(), d)
			p.SetDoubleValue(c.LateWorkSeconds)
		}
	}
}

func (e *emitter) sum(ms pmetric.MetricSlice, name, unit, desc string) pmetric.Sum {
	m := ms.AppendEmpty()
	m.SetName(name)
	m.SetUnit(unit)
	m.SetDescription(desc)
	s := m.SetEmptySum()
	s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	s.SetIsMonotonic(true)
	return s
}

func (e *emitter) gauge(ms pmetric.MetricSlice, name, unit, desc string) pmetric.Gauge {
	m := ms.AppendEmpty()
	m.SetName(name)
	m.SetUnit(unit)
	m.SetDescription(desc)
	return m.SetEmptyGauge()
}

func (e *emitter) point(s pmetric.Sum, ts pcommon.Timestamp) pmetric.NumberDataPoint {
	dp := s.DataPoints().AppendEmpty()
	dp.SetStartTimestamp(e.start)
	dp.SetTimestamp(ts)
	return dp
}

// findingRecord writes one finding as a log record: the summary as the body, the trace and first
// span as the record's context (so a log backend links it to the trace), the rest as attributes.
func findingRecord(lr plog.LogRecord, f *analyzer.Finding, ts pcommon.Timestamp) {
	lr.SetTimestamp(ts)
	lr.SetObservedTimestamp(ts)
	lr.SetEventName(eventFinding)
	lr.SetSeverityText(f.Severity.String())
	switch f.Severity {
	case analyzer.SeverityCritical:
		lr.SetSeverityNumber(plog.SeverityNumberError)
	case analyzer.SeverityWarning:
		lr.SetSeverityNumber(plog.SeverityNumberWarn)
	default:
		lr.SetSeverityNumber(plog.SeverityNumberInfo)
	}
	lr.Body().SetStr(f.Summary)
	var tid pcommon.TraceID
	if len(f.TraceID) == 2*len(tid) {
		if _, err := hex.Decode(tid[:], []byte(f.TraceID)); err == nil {
			lr.SetTraceID(tid)
		}
	}
	var sid pcommon.SpanID
	if len(f.SpanIDs) > 0 && len(f.SpanIDs[0]) == 2*len(sid) {
		if _, err := hex.Decode(sid[:], []byte(f.SpanIDs[0])); err == nil {
			lr.SetSpanID(sid)
		}
	}
	a := lr.Attributes()
	a.PutStr(attrDetector, f.Detector)
	a.PutStr(attrSeverity, f.Severity.String())
	if f.Service != "" {
		a.PutStr(attrService, f.Service)
	}
	if f.Dependency != "" {
		a.PutStr(attrDependency, f.Dependency)
	}
	if f.Action != "" {
		a.PutStr(attrAction, f.Action)
	}
	if len(f.SpanIDs) > 0 {
		s := a.PutEmptySlice(attrSpanIDs)
		for _, id := range f.SpanIDs {
			s.AppendEmpty().SetStr(id)
		}
	}
	keys := make([]string, 0, len(f.Evidence))
	for k := range f.Evidence {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		putEvidence(a.PutEmpty(attrEvidencePrefix+k), f.Evidence[k])
	}
}

// putEvidence stores one evidence value as its JSON form - the one the --format json report
// shows - would read back with integers kept as integers: a Float without a fraction is an
// integer, invalid UTF-8 is U+FFFD, and a nil list or record is empty (JSON's null).
func putEvidence(v pcommon.Value, x analyzer.Value) {
	switch x.Kind() {
	case analyzer.KindInt:
		n, _ := x.Int()
		v.SetInt(int64(n))
	case analyzer.KindFloat:
		f, _ := x.Float()
		setFloat(v, f)
	case analyzer.KindText:
		t, _ := x.Text()
		v.SetStr(validText(t))
	case analyzer.KindBool:
		b, _ := x.Bool()
		v.SetBool(b)
	case analyzer.KindTexts:
		if t, _ := x.Texts(); t != nil {
			s := v.SetEmptySlice()
			s.EnsureCapacity(len(t))
			for _, e := range t {
				s.AppendEmpty().SetStr(validText(e))
			}
		}
	case analyzer.KindInts:
		if t, _ := x.Ints(); t != nil {
			s := v.SetEmptySlice()
			s.EnsureCapacity(len(t))
			for _, e := range t {
				s.AppendEmpty().SetInt(int64(e))
			}
		}
	case analyzer.KindFloats:
		if t, _ := x.Floats(); t != nil {
			s := v.SetEmptySlice()
			s.EnsureCapacity(len(t))
			for _, e := range t {
				setFloat(s.AppendEmpty(), e)
			}
		}
	case analyzer.KindRecord:
		if r, _ := x.Record(); r != nil {
			setRecord(v.SetEmptyMap(), r)
		}
	case analyzer.KindRecords:
		if rs, _ := x.Records(); rs != nil {
			s := v.SetEmptySlice()
			s.EnsureCapacity(len(rs))
			for _, r := range rs {
				e := s.AppendEmpty()
				if r != nil {
					setRecord(e.SetEmptyMap(), r)
				}
			}
		}
	}
}

// setRecord writes a record's entries in key order, as the report does.
func setRecord(m pcommon.Map, r analyzer.Evidence) {
	keys := slices.Sorted(maps.Keys(r))
	m.EnsureCapacity(len(keys))
	for _, k := range keys {
		putEvidence(m.PutEmpty(validText(k)), r[k])
	}
}

// validText is s as JSON writes it: each byte that is not part of valid UTF-8 becomes U+FFFD.
func validText(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		b.WriteRune(r) // utf8.RuneError for an invalid byte, which is U+FFFD
		i += size
	}
	return b.String()
}

// setFloat writes a finite float64 as JSON's decoding with UseNumber reads it back. JSON writes
// integral values below 1e21 without a fraction or exponent, in their shortest form (digits
// padded with zeros), and the decoding makes an integer of what parses as an int64: below 2^53
// that is the value itself; above, the padded text decides.
func setFloat(v pcommon.Value, f float64) {
	if f == math.Trunc(f) {
		if math.Abs(f) < 1<<53 {
			v.SetInt(int64(f))
			return
		}
		if math.Abs(f) < 1e21 {
			if n, err := strconv.ParseInt(strconv.FormatFloat(f, 'f', -1, 64), 10, 64); err == nil {
				v.SetInt(n)
				return
			}
		}
	}
	v.SetDouble(f)
}
