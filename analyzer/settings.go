package analyzer

import "time"

// Settings are detector thresholds. The zero value means the documented defaults; a policy file
// overrides them per operation class.
type Settings struct {
	// MaxFanout is the number of origins one attempt may reach (unbounded-fanout). 0 means 1.
	MaxFanout int
	// MaxFanoutFor, when set, gives the limit for one operation (a policy's maxFanout for the
	// operation's class); it returns 0 to fall back to MaxFanout.
	MaxFanoutFor func(op *Operation) int
	// MinRetryingLayers is how many retrying layers on one root-to-leaf path make
	// retry-amplification fire. 0 means 2.
	MinRetryingLayers int
	// CriticalFactor is the amplification factor (leaf calls per root request) at which
	// retry-amplification is critical rather than a warning. 0 means 9: two layers of three
	// attempts each already multiply a failing dependency's load by nine.
	CriticalFactor int
	// SkewTolerance is the clock skew tolerated between services. 0 means DefaultSkewTolerance.
	SkewTolerance time.Duration
	// Extra carries detector-specific settings by detector name, for detectors added later
	// without changing this struct.
	Extra map[string]any
}

// FanoutLimit is the allowed fan-out for op.
func (s Settings) FanoutLimit(op *Operation) int {
	if s.MaxFanoutFor != nil {
		if n := s.MaxFanoutFor(op); n > 0 {
			return n
		}
	}
	if s.MaxFanout > 0 {
		return s.MaxFanout
	}
	return 1
}

// RetryingLayers is the MinRetryingLayers threshold with its default.
func (s Settings) RetryingLayers() int {
	if s.MinRetryingLayers > 0 {
		return s.MinRetryingLayers
	}
	return 2
}

// Critical is the CriticalFactor threshold with its default.
func (s Settings) Critical() int {
	if s.CriticalFactor > 0 {
		return s.CriticalFactor
	}
	return 9
}

// Skew is the SkewTolerance in nanoseconds with its default.
func (s Settings) Skew() int64 {
	if s.SkewTolerance > 0 {
		return int64(s.SkewTolerance)
	}
	return int64(DefaultSkewTolerance)
}
