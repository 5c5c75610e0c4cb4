package analyzer

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stormwatch/stormwatch/analyzer/internal/build"
	"github.com/stormwatch/stormwatch/spans"
)

// ReportVersion is the version of the --format json contract. Bump it when a field or an evidence key
// is renamed or removed; adding is compatible. Version 2 names the counts as the screens do:
// calls and intents (version 1's physical_calls and logical_operations).
const ReportVersion = 2

// Severity ranks findings. The driver (policy, --fail-on) decides it; detectors suggest a default.
type Severity int8

// Severities, ordered: a comparison with >= is "at or above".
const (
	SeverityInfo Severity = iota
	SeverityWarning
	SeverityCritical
)

var severityNames = [...]string{"info", "warning", "critical"}

func (s Severity) String() string {
	if s >= 0 && int(s) < len(severityNames) {
		return severityNames[s]
	}
	return fmt.Sprintf("severity(%d)", int8(s))
}

// ParseSeverity reads "info", "warning" or "critical".
func ParseSeverity(text string) (Severity, error) {
	for i, n := range severityNames {
		if n == text {
			return Severity(i), nil
		}
	}
	return 0, fmt.Errorf("unknown severity %q (want info, warning or critical)", text)
}

// MarshalText makes severities appear by name in JSON.
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a severity by name.
func (s *Severity) UnmarshalText(b []byte) error {
	v, err := ParseSeverity(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// Finding is one defect with its proof. Field names are the JSON report contract (docs/analyze.md).
type Finding struct {
	Detector   string   `json:"detector"`
	Severity   Severity `json:"severity"`
	TraceID    string   `json:"trace_id,omitempty"`
	SpanIDs    []string `json:"span_ids,omitempty"`
	Service    string   `json:"service,omitempty"`
	Dependency string   `json:"dependency,omitempty"`
	// Summary says in one sentence what happened, with the numbers.
	Summary string `json:"summary"`
	// Action says in one sentence what to change.
	Action string `json:"action,omitempty"`
	// Evidence keys per detector are documented in docs/detectors.md and never renamed without
	// bumping ReportVersion.
	Evidence Evidence `json:"evidence,omitempty"`
	// TimeUnixNano is when it happened: the earliest start of the spans it names (0 when unknown,
	// as for findings about many traces).
	TimeUnixNano int64 `json:"time_unix_nano,omitempty"`
}

// DependencyStats is "origin saw 120 (3.00x)" (docs/principles.md#retry-cost) for one dependency.
type DependencyStats struct {
	// Dependency names the callee by what survives a restart (see "Accounting" in
	// docs/analyzer.md): its service.name where its SERVER spans are seen, else peer.service, an
	// Envoy upstream_cluster, rpc.service, or the host without its port. Every figure, finding,
	// metric label and diff keys on it.
	Dependency string `json:"dependency"`
	// Origins are the addresses (scheme://host:port) the calls went to, most calls first, at
	// most eight: replicas, pod IPs and ports that change between runs. Detail, not a key.
	Origins []string `json:"origins,omitempty"`
	// MoreOrigins counts the origins not listed; the analyzer counts at most 64 origins per
	// dependency, and the calls to any past those add one.
	MoreOrigins int `json:"more_origins,omitempty"`
	// Service is the callee's service.name when its SERVER spans are in the data (or the caller's
	// upstream_cluster or peer.service): then it is the Dependency too. Empty for a dependency
	// named by its RPC service or host. One address answered by several services is several
	// dependencies, each with that address among its Origins.
	Service string `json:"service,omitempty"`
	// PhysicalCalls counts CLIENT spans that reached the dependency.
	PhysicalCalls int `json:"calls"`
	// LogicalOperations counts what the top layer asked for, the intents (see Amplification in
	// docs/analyzer.md).
	LogicalOperations int `json:"intents"`
	// Amplification is PhysicalCalls / LogicalOperations.
	Amplification float64 `json:"amplification"`
	// Outcomes counts physical calls by outcome: the HTTP status ("503"), the gRPC code
	// ("UNAVAILABLE"), or a class ("timeout", "connect error", "refused", "ok").
	Outcomes map[string]int `json:"outcomes"`
	// Callers are the services that called the dependency.
	Callers []string `json:"callers,omitempty"`
	// ByCaller splits the figures by calling service (most physical calls first): their physical
	// calls, logical operations and outcomes sum to the dependency's. A call whose caller span has
	// no service.name is under caller "".
	ByCaller []CallerStats `json:"by_caller,omitempty"`
}

// OriginsText is the addresses of the dependency as a table cell: the one with most calls, and
// how many more there are ("http://10.0.0.7:8080 +2"); "" for none.
func (d *DependencyStats) OriginsText() string {
	if len(d.Origins) == 0 {
		return ""
	}
	if more := len(d.Origins) - 1 + d.MoreOrigins; more > 0 {
		return d.Origins[0] + " +" + strconv.Itoa(more)
	}
	return d.Origins[0]
}

// CallerStats are one calling service's figures toward one dependency: the "physical calls,
// logical operations and amplification per (caller service, dependency)".
type CallerStats struct {
	// Caller is the calling service's service.name.
	Caller            string `json:"caller"`
	PhysicalCalls     int    `json:"calls"`
	LogicalOperations int    `json:"intents"`
	// Amplification is PhysicalCalls / LogicalOperations (0 when no logical operation is
	// credited to this caller: all its calls were copies made by a layer above, or continued
	// another trace's operation).
	Amplification float64        `json:"amplification"`
	Outcomes      map[string]int `json:"outcomes"`
}

// InputStats says what was analysed.
type InputStats struct {
	Spans      int `json:"spans"`
	Traces     int `json:"traces"`
	Operations int `json:"operations"`
}

// Report is the outcome of an analysis: the --format json contract.
type Report struct {
	Version      int               `json:"version"`
	Input        InputStats        `json:"input"`
	Dependencies []DependencyStats `json:"dependencies"`
	Findings     []Finding         `json:"findings"`
	// Groups are the findings grouped by detector, caller and dependency (GroupFindings).
	Groups []FindingGroup `json:"groups"`
	// Costs are what retries cost per entry point and per dependency (CostEntry).
	Costs []CostEntry `json:"costs"`
	// Notes say what the analysis could not do or had to guess around: orphan spans, parent cycles,
	// truncated traces, attempts that landed in separate traces with nothing to join them.
	// Always present in JSON (an empty list when there is nothing to say), so a reader can tell
	// "nothing noted" from a report that does not carry notes.
	Notes []string `json:"notes"`
	// TraceURL, when set, is where a trace can be looked at, with "{trace_id}" standing for a
	// finding's trace id: the Jaeger UI's trace page when the traces came from a Jaeger.
	TraceURL string `json:"trace_url,omitempty"`
	// Live, in a running collector's report (GET /api/v1/report), says as of when it is and what
	// it does not count yet; absent from an offline report, which counts everything it read.
	Live *LiveState `json:"live,omitempty"`
}

// LiveState is where a live analysis stands. A reader that compares reports (stormwatch diff
// against a collector) waits until the traces that arrived before it asked are settled and
// judged: SettledThroughUnixNano and then WindowThroughUnixNano past that moment.
type LiveState struct {
	// AtUnixNano is when the report was taken, on the collector's clock.
	AtUnixNano int64 `json:"at_unix_nano"`
	// PendingTraces are traces still waiting for their settle period: not in the report yet.
	PendingTraces int `json:"pending_traces"`
	// SettledThroughUnixNano: every trace whose last span arrived before it is in the report.
	SettledThroughUnixNano int64 `json:"settled_through_unix_nano"`
	// WindowThroughUnixNano: the operations analyzed before it are judged by the cross-trace
	// detectors (retry budget, synchronized retries, breakers) too; those analyzed since wait for
	// their next run, WindowEveryMs apart at least.
	WindowThroughUnixNano int64 `json:"window_through_unix_nano"`
	WindowEveryMs         int64 `json:"window_every_ms,omitempty"`
}

// TraceLink is the address of trace id's page per TraceURL, or "" without one.
func (r *Report) TraceLink(id string) string {
	if r.TraceURL == "" || id == "" {
		return ""
	}
	return strings.ReplaceAll(r.TraceURL, "{trace_id}", id)
}

// AttemptKind says why an attempt was made (resilience.attempt.kind, or inferred).
type AttemptKind string

// Attempt kinds.
const (
	KindInitial  AttemptKind = "initial"
	KindRetry    AttemptKind = "retry"
	KindHedge    AttemptKind = "hedge"
	KindFanout   AttemptKind = "fanout"
	KindFallback AttemptKind = "fallback"
)

// AttemptKindResend marks a resend that is not a retry: the request sent again after a redirect
// (3xx) or an authentication challenge (401). It does not count as an attempt of a retry loop.
const AttemptKindResend AttemptKind = "resend"

// Outcome classes (resilience.outcome values; inferred from status codes when absent).
const (
	OutcomeOK        = "ok"
	OutcomeRetryable = "retryable"
	OutcomePermanent = "permanent"
	OutcomeTimeout   = "timeout"
	OutcomeCancelled = "cancelled"
	OutcomeRefused   = "refused"
)

// Attempt is one try of a logical operation: usually one CLIENT span, several with fan-out.
type Attempt struct {
	// Number starts at 1.
	Number int
	Kind   AttemptKind
	// SpanID is the attempt's CLIENT span (the first one when it fanned out).
	SpanID spans.SpanID
	// Calls are all the physical calls (CLIENT spans) this attempt made; len > 1 is fan-out.
	Calls []spans.SpanID
	// Origins are the distinct scheme://host:port the calls went to.
	Origins       []string
	StartUnixNano int64
	EndUnixNano   int64
	// Outcome is the class: ok, retryable, permanent, timeout, cancelled, refused.
	Outcome string
	// Status is the HTTP status or gRPC code as text, "" when the call got no answer.
	Status string
	// BackoffNanos is the pause before this attempt (recorded, or the gap since the previous
	// one); -1 when it cannot be measured (attempts seen only on callees whose clocks differ).
	BackoffNanos int64

	built build.Attempt // what inference wrote of it (see build.go)
}

// RecordedNumber is the attempt's number as its span recorded it (resilience.attempt), -1 when
// absent; Number is the one the analysis counted.
func (a *Attempt) RecordedNumber() int64 { return a.built.RecordedNumber }

// Operation is one logical operation: one intent of one caller toward one dependency.
type Operation struct {
	// ID is resilience.operation.id, or a stable id stormwatch made up when inferring.
	ID      string
	Name    string
	TraceID spans.TraceID
	// SpanID is the operation's own INTERNAL span, or the caller span its attempts hang from.
	SpanID spans.SpanID
	// Caller is the calling service; Owner the service that decided to retry (usually the caller).
	Caller     string
	Owner      string
	Dependency string
	// DependencyService is the callee's service.name when known.
	DependencyService string
	Attempts          []Attempt
	// Inferred is true when the attempts were grouped from stock instrumentation, false when the
	// reference client's resilience.* attributes said so.
	Inferred bool
	// Terminal is complete, fallback:<name>, fail-fast or shed; StopReason as in docs/attributes.md.
	Terminal   string
	StopReason string
	// DeadlineUnixNano is 0 when unknown.
	DeadlineUnixNano int64
	StartUnixNano    int64
	EndUnixNano      int64
	// Parent is the operation this one runs inside (the caller's own logical operation), or nil at
	// the root. Walking Parent gives the chain of layers from a leaf call to the root request.
	Parent *Operation
	// Findings counts the findings that name this operation's spans.
	Findings int
	// SampleProbability is the probability its trace was kept with by a sampler, as the trace's
	// spans say it (docs/costs.md#sampled-fleets); 0 when they do not. One operation recorded
	// stands for 1/SampleProbability of the traffic.
	SampleProbability float64

	built build.Operation // what inference wrote of it: intent key, child count (see build.go)
}

// IsLeaf reports whether no operation runs inside this one: its dependency is a leaf of the
// call tree (as far as the traces show).
func (o *Operation) IsLeaf() bool { return o.built.Children == 0 }

// ChildCount counts the operations whose Parent is o (IsLeaf when there are none).
func (o *Operation) ChildCount() int { return o.built.Children }

// IntentKey identifies what the operation was asked to do, the same for every copy made by the
// retries of the layers above it within one trace. Operations with equal keys in one trace are
// one logical operation of the top layer.
func (o *Operation) IntentKey() uint64 { return o.built.Intent }

// Tries counts the attempts of the retry loop: resends after a redirect or a 401 and hedged
// copies are not tries.
func (o *Operation) Tries() int {
	n := 0
	for i := range o.Attempts {
		if k := o.Attempts[i].Kind; k != AttemptKindResend && k != KindHedge {
			n++
		}
	}
	return n
}

// TryCounter answers Tries for the operations of one trace, remembering the answer for an
// operation of many attempts: a pass that asks each leaf's ancestors for their tries asks a wide
// operation (an application loop of thousands of tries over as many leaves) once per leaf, and
// counting its attempts each time would cost the square of its width. The zero value is ready.
type TryCounter struct {
	memo map[*Operation]int
}

// Tries is op.Tries().
func (c *TryCounter) Tries(op *Operation) int {
	if len(op.Attempts) <= 16 {
		return op.Tries()
	}
	if n, ok := c.memo[op]; ok {
		return n
	}
	if c.memo == nil {
		c.memo = map[*Operation]int{}
	}
	n := op.Tries()
	c.memo[op] = n
	return n
}

// Chain is the operation and the operations it runs inside, root first.
func (o *Operation) Chain() []*Operation {
	var c []*Operation
	for p := o; p != nil; p = p.Parent {
		c = append(c, p)
	}
	slices.Reverse(c)
	return c
}

// Latency is the operation's wall time.
func (o *Operation) Latency() time.Duration {
	return time.Duration(o.EndUnixNano - o.StartUnixNano)
}

// PhysicalCalls counts the CLIENT spans of all attempts.
func (o *Operation) PhysicalCalls() int {
	n := 0
	for i := range o.Attempts {
		n += len(o.Attempts[i].Calls)
	}
	return n
}
