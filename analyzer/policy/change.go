package policy

import (
	"fmt"
	"strconv"
	"strings"
)

// Change is one what-if edit: set Field of the retry loops owned by Layer (a service name, or "*"
// for every layer) to Value. The analyzer's what-if replays the recorded operations under it.
type Change struct {
	Layer string
	// Field is maxAttempts, maxFanout, retryBudget or breaker.
	Field string
	Value float64
	// Pos is where the change is written in a policy file; zero when it came from the flag.
	Pos Pos
}

func (c Change) String() string {
	return c.Layer + "." + c.Field + "=" + strconv.FormatFloat(c.Value, 'g', -1, 64)
}

// What-if fields.
const (
	FieldMaxAttempts = "maxAttempts"
	FieldMaxFanout   = "maxFanout"
	FieldRetryBudget = "retryBudget"
	// FieldBreaker is a per-origin circuit breaker's threshold: consecutive failed logical
	// operations that open it.
	FieldBreaker = "breaker"
)

// ParseChanges reads "edge.maxAttempts=1,api.maxAttempts=1". The layer is everything before the
// last dot, so service names with dots work.
func ParseChanges(s string) ([]Change, error) {
	var out []Change
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lhs, rhs, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fmt.Errorf("change %q: want layer.field=value, such as edge.maxAttempts=1", part)
		}
		lhs, rhs = strings.TrimSpace(lhs), strings.TrimSpace(rhs)
		dot := strings.LastIndexByte(lhs, '.')
		if dot <= 0 || dot == len(lhs)-1 {
			return nil, fmt.Errorf("change %q: want layer.field=value, such as edge.maxAttempts=1", part)
		}
		c := Change{Layer: lhs[:dot], Field: lhs[dot+1:]}
		switch c.Field {
		case FieldMaxAttempts, FieldMaxFanout, FieldBreaker:
			n, err := strconv.Atoi(rhs)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("change %q: %s must be a whole number of at least 1", part, c.Field)
			}
			c.Value = float64(n)
		case FieldRetryBudget:
			f, err := strconv.ParseFloat(rhs, 64)
			if err != nil || f < 0 || f > 1 {
				return nil, fmt.Errorf("change %q: retryBudget must be a ratio between 0 and 1", part)
			}
			c.Value = f
		default:
			return nil, fmt.Errorf("change %q: unknown field %q (want maxAttempts, maxFanout, retryBudget or breaker)", part, c.Field)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no changes in %q: want layer.field=value, such as edge.maxAttempts=1", s)
	}
	return out, nil
}
