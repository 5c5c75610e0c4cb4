package policy

import (
	"fmt"
	"strconv"
	"strings"
)

// Outcome classes a retryable list may name besides status codes. They are the analyzer's attempt
// outcome classes (docs/attributes.md, resilience.outcome) that describe a failure to get an answer.
const (
	OutcomeTimeout      = "timeout"
	OutcomeConnectError = "connect-error"
	OutcomeCancelled    = "cancelled"
)

// Outcomes is a set of retryable outcomes: HTTP statuses ("503"), status classes ("5xx"), gRPC
// codes ("UNAVAILABLE") and the outcome classes timeout, connect-error and cancelled.
type Outcomes struct {
	tokens []string
}

// Tokens returns the outcomes as written (normalised), in file order.
func (o Outcomes) Tokens() []string { return append([]string(nil), o.tokens...) }

// Len is the number of outcomes listed.
func (o Outcomes) Len() int { return len(o.tokens) }

// DefaultRetryable is the transient list of docs/principles.md#backoff-and-classification:
// timeouts, connect errors, 429, 502, 503, 504 and gRPC's UNAVAILABLE, DEADLINE_EXCEEDED and
// RESOURCE_EXHAUSTED.
func DefaultRetryable() Outcomes {
	return Outcomes{tokens: []string{OutcomeTimeout, OutcomeConnectError, "429", "502", "503", "504",
		"UNAVAILABLE", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED"}}
}

// Contains reports whether an attempt that ended with status (an HTTP status or gRPC code as text,
// "" when no answer came) and outcome class (ok, retryable, permanent, timeout, cancelled, refused)
// is in the set. A connect error is an attempt with no status that is neither a timeout nor a
// cancellation.
func (o Outcomes) Contains(status, outcome string) bool {
	for _, t := range o.tokens {
		switch t {
		case OutcomeTimeout, OutcomeCancelled:
			if outcome == t {
				return true
			}
		case OutcomeConnectError:
			if status == "" && outcome != OutcomeTimeout && outcome != OutcomeCancelled && outcome != "ok" && outcome != "refused" {
				return true
			}
		default:
			if status == "" {
				continue
			}
			if t == status {
				return true
			}
			if len(t) == 3 && t[1:] == "xx" && len(status) == 3 && status[0] == t[0] {
				return true
			}
		}
	}
	return false
}

// grpcCodes are the canonical gRPC status names.
var grpcCodes = map[string]bool{
	"OK": true, "CANCELLED": true, "UNKNOWN": true, "INVALID_ARGUMENT": true, "DEADLINE_EXCEEDED": true,
	"NOT_FOUND": true, "ALREADY_EXISTS": true, "PERMISSION_DENIED": true, "RESOURCE_EXHAUSTED": true,
	"FAILED_PRECONDITION": true, "ABORTED": true, "OUT_OF_RANGE": true, "UNIMPLEMENTED": true,
	"INTERNAL": true, "UNAVAILABLE": true, "DATA_LOSS": true, "UNAUTHENTICATED": true,
}

// parseOutcome normalises one retryable token or says what is wrong with it.
func parseOutcome(s string) (string, error) {
	t := strings.TrimSpace(s)
	switch strings.ToLower(t) {
	case OutcomeTimeout, OutcomeConnectError, OutcomeCancelled:
		return strings.ToLower(t), nil
	}
	if n, err := strconv.Atoi(t); err == nil {
		if n < 100 || n > 599 {
			return "", fmt.Errorf("HTTP status %d is outside 100-599", n)
		}
		return t, nil
	}
	if len(t) == 3 && strings.EqualFold(t[1:], "xx") && t[0] >= '1' && t[0] <= '5' {
		return t[:1] + "xx", nil
	}
	if grpcCodes[strings.ToUpper(t)] {
		return strings.ToUpper(t), nil
	}
	return "", fmt.Errorf("unknown outcome %q (want an HTTP status such as 503, a class such as 5xx, a gRPC code such as UNAVAILABLE, or timeout, connect-error, cancelled)", s)
}
