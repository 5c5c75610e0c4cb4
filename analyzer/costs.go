package analyzer

// CostEntry is what retries cost one entry point (the service and span name of the requests'
// root spans) or one dependency: the latency they added to users' requests, the calls they
// added, and the work done after callers gave up (docs/costs.md). The report lists entry points
// first, then dependencies, each by total added latency, most first.
type CostEntry struct {
	// Kind is "entry" (Service and Name set) or "dependency" (Dependency set).
	Kind       string `json:"kind"`
	Service    string `json:"service,omitempty"`
	Name       string `json:"name,omitempty"`
	Dependency string `json:"dependency,omitempty"`
	// Requests counts the requests (trace roots) recorded: for a dependency, those whose trace
	// called it.
	Requests int `json:"requests"`
	// RequestsPerSecond is Requests scaled by the sampling probability over Seconds.
	RequestsPerSecond float64 `json:"requests_per_second"`
	// RetryShare is the share of the requests' time their critical paths spent in failed attempts
	// that were retried and in the pauses between attempts (0 to 1).
	RetryShare float64 `json:"retry_share"`
	// AddedLatencyMs is the latency retries added per request, in milliseconds.
	AddedLatencyMs LatencySummary `json:"added_latency_ms"`
	// HedgeMs is the time critical paths spent in hedges' losing copies, in milliseconds.
	HedgeMs float64 `json:"hedge_ms,omitempty"`
	// ExtraCalls counts the calls made by retries and hedges and by the copies of calls that
	// the retries of layers above made, as recorded.
	ExtraCalls int `json:"extra_calls"`
	// ExtraCallsPerSecond is ExtraCalls scaled by the sampling probability over Seconds.
	ExtraCallsPerSecond float64 `json:"extra_calls_per_second"`
	// LateWorkSeconds is the span-seconds callees worked after their callers gave up, as recorded.
	LateWorkSeconds float64 `json:"late_work_s"`
	// Seconds is the time the rates are over: from the first request's start to the last one's
	// end, over everything analyzed.
	Seconds float64 `json:"seconds"`
	// Sampling says how the rates were scaled: "recorded" (the spans carried the sampling
	// probability of every request: rates are estimates of the whole traffic), "partly" (of
	// some), "unknown" (of none: rates are as recorded, and a sampled fleet sent more).
	Sampling string `json:"sampling"`
	// AddedLatencyBuckets are the requests whose added latency is at most each of
	// AddedLatencyBoundsMs (cumulative, as a Prometheus histogram counts them); not in JSON.
	AddedLatencyBuckets []uint64 `json:"-"`
}

// MaxEntrySeries bounds the entry points a metrics exporter gives series of their own: a root
// span's name is not always a route template, and a series per distinct name would grow without
// end. Costs lists entry points by added latency, so the ones left out are those retries cost
// least.
const MaxEntrySeries = 100

// AddedLatencyBoundsMs are the upper bounds of CostEntry.AddedLatencyBuckets, in milliseconds.
var AddedLatencyBoundsMs = []float64{1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000}

// LatencySummary is a distribution of milliseconds: its median, 99th percentile and sum.
type LatencySummary struct {
	P50   float64 `json:"p50"`
	P99   float64 `json:"p99"`
	Total float64 `json:"total"`
}

// Kinds of CostEntry.
const (
	CostEntryPoint  = "entry"
	CostDependency  = "dependency"
	SamplingKnown   = "recorded"
	SamplingPartly  = "partly"
	SamplingUnknown = "unknown"
)
