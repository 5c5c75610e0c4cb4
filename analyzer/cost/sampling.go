package cost

import (
	"strconv"
	"strings"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/spans"
)

// Probability is the probability with which the request rooted at span root of t was sampled, 0
// when its spans do not say. It reads, on the root span first and else on any span of the trace:
//
//   - OpenTelemetry's consistent probability sampling: the "th" sub-key of the "ot" entry of the
//     span's W3C trace state (kept by the decoders as the attribute spans.AttrTraceState): the
//     rejection threshold T, up to 14 hex digits (56 bits, trailing zeros dropped), keeps a trace
//     when its 56 random bits are at least T, so with probability 1 - T/2^56;
//   - Jaeger's sampler tags: sampler.type "probabilistic" with sampler.param the probability;
//     "const" with 1 keeps everything.
//
// A parent-based sampler writes the root's decision on every span of the trace, so one request
// has one probability whatever number of services recorded it: the root's wins, and otherwise
// the largest seen, which never counts a request more often than its least sampled part says.
func Probability(t *analyzer.Trace, root int) float64 {
	if p := spanProbability(&t.Spans[root]); p > 0 {
		return p
	}
	best := 0.0
	for i := range t.Spans {
		if p := spanProbability(&t.Spans[i]); p > best {
			best = p
		}
	}
	return best
}

func spanProbability(s *spans.Span) float64 {
	for i := range s.Attrs {
		a := &s.Attrs[i]
		switch a.Key {
		case spans.AttrTraceState:
			if p, ok := ThresholdProbability(a.AsString()); ok {
				return p
			}
		case spans.AttrJaegerSamplerType:
			switch a.AsString() {
			case "probabilistic":
				if v, ok := s.Attr(spans.AttrJaegerSamplerParam); ok {
					p, err := strconv.ParseFloat(v.AsString(), 64)
					if err == nil && p > 0 && p <= 1 {
						return p
					}
				}
			case "const":
				if v, ok := s.Attr(spans.AttrJaegerSamplerParam); ok && (v.AsString() == "1" || v.AsString() == "true") {
					return 1
				}
			}
		}
	}
	return 0
}

// ThresholdProbability reads the sampling probability from a W3C trace state's "ot" entry
// ("ot=th:c" is 25%, "ot=th:0" 100%); false when it has no valid "th".
func ThresholdProbability(tracestate string) (float64, bool) {
	for entry := range strings.SplitSeq(tracestate, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(entry), "=")
		if !ok || k != "ot" {
			continue
		}
		for sub := range strings.SplitSeq(v, ";") {
			name, th, ok := strings.Cut(sub, ":")
			if !ok || name != "th" {
				continue
			}
			if th == "" || len(th) > 14 {
				return 0, false
			}
			n, err := strconv.ParseUint(th, 16, 64)
			if err != nil || strings.ToLower(th) != th {
				return 0, false
			}
			n <<= 4 * (14 - len(th)) // trailing zeros are dropped when written
			return 1 - float64(n)/float64(uint64(1)<<56), true
		}
	}
	return 0, false
}
