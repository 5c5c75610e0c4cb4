package audit

import (
	"math"

	"github.com/stormwatch/stormwatch/analyzer"
)

// SampledCount scales a count of the whole traffic (a detector's minimum sample, a reserve of
// retries) to the operations a window holds when the traces were sampled: a window of traces
// kept with probability p holds p of the traffic, and the ratios the windowed detectors judge
// are the same in it, so it is not too small for holding less (docs/costs.md#sampled-fleets).
// The probability taken is the largest among ops (an operation whose spans do not say counts as
// kept with 1), so a count is never scaled below what the least sampled traffic in the window
// stands for; the result is at least 1 when n is.
func SampledCount(ops []*analyzer.Operation, n int) int {
	if n <= 0 || len(ops) == 0 {
		return n
	}
	p := 0.0
	for _, op := range ops {
		q := op.SampleProbability
		if q <= 0 || q > 1 {
			return n // some traffic unsampled, or not said: counts as recorded
		}
		p = max(p, q)
	}
	return max(1, int(math.Ceil(float64(n)*p)))
}
