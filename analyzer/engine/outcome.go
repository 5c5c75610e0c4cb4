package engine

import (
	"strconv"
	"strings"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/spans"
)

// A call's outcome: the class (ok, retryable, permanent, timeout, cancelled, refused) and the
// status text that DependencyStats.Outcomes counts, read from the HTTP status, the gRPC status
// in any of its spellings, a proxy's flags (envoy.go) or the error the span records.

var grpcCodes = [...]string{"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
	"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",
	"OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"}

// classify finds a CLIENT span's outcome class and status text.
func classify(k *known) (outcome, status string) {
	s := k.s
	explicit := k.str(wkOutcome)
	a, ok := k.attr(wkHTTPStatus)
	if !ok {
		a, ok = k.attr(wkLegacyHTTPStatusCode)
	}
	if ok {
		status = noAnswer(statusText(a))
	}
	if status != "" {
		code, _ := a.AsInt()
		switch {
		case code >= 200 && code < 400:
			outcome = analyzer.OutcomeOK
		case code == 408 || code == 425 || code == 429 || code >= 500:
			outcome = analyzer.OutcomeRetryable
		default:
			outcome = analyzer.OutcomePermanent
		}
	} else if g := grpcStatus(k); g != "" {
		status = g
		switch g {
		case "OK":
			outcome = analyzer.OutcomeOK
		case "UNAVAILABLE", "RESOURCE_EXHAUSTED", "ABORTED":
			outcome = analyzer.OutcomeRetryable
		case "DEADLINE_EXCEEDED":
			outcome = analyzer.OutcomeTimeout
		case "CANCELLED":
			outcome = analyzer.OutcomeCancelled
		default:
			outcome = analyzer.OutcomePermanent
		}
	} else if s.Status == spans.StatusError || k.str(wkErrorType) != "" || k.errorTag() {
		outcome = errorClass(k)
	} else {
		outcome = analyzer.OutcomeOK
	}
	if f := k.proxyOutcome(status); f != "" {
		outcome = f
	}
	if explicit != "" {
		outcome = explicit
	}
	return outcome, status
}

// grpcStatus reads either spelling of the gRPC status: the current string attribute or the older
// integer one.
func grpcStatus(k *known) string {
	a, ok := k.attr(wkRPCStatus)
	if !ok {
		a, ok = k.attr(wkRPCGRPCStatus)
	}
	if !ok {
		a, ok = k.attr(wkEnvoyGRPCStatus)
	}
	if !ok {
		return ""
	}
	// A name ("UNAVAILABLE") is the common case: no number parsing (and its error) for it.
	if a.Type == spans.ValueString && (a.Str == "" || a.Str[0] < '0' || a.Str[0] > '9') {
		if isUpper(a.Str) {
			return a.Str
		}
		return strings.ToUpper(a.Str)
	}
	if n, isNum := a.AsInt(); isNum && n >= 0 && int(n) < len(grpcCodes) {
		return grpcCodes[n]
	}
	return strings.ToUpper(a.AsString())
}

func isUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if 'a' <= s[i] && s[i] <= 'z' {
			return false
		}
	}
	return true
}

// statusTexts are the HTTP statuses as text, made once: every call has one.
var statusTexts = func() []string {
	t := make([]string, 600)
	for i := range t {
		t[i] = strconv.Itoa(i)
	}
	return t
}()

func statusText(a spans.Attr) string {
	if n, ok := a.AsInt(); ok && n >= 0 && n < int64(len(statusTexts)) {
		return statusTexts[n]
	}
	return a.AsString()
}

// errorClass reads a failed call with no status code: a timeout, a cancellation, a breaker's
// refusal, or (anything else) a connect-level error that is worth retrying.
func errorClass(k *known) string {
	s := k.s
	text := strings.ToLower(k.str(wkErrorType) + " " + s.StatusMessage + " " + k.str(wkExceptionType) + " " + k.str(wkExceptionMessage))
	for i := range s.Events {
		for _, a := range s.Events[i].Attrs {
			if a.Key == "exception.message" || a.Key == "exception.type" {
				text += " " + strings.ToLower(a.AsString())
			}
		}
	}
	switch {
	case strings.Contains(text, "deadline") || strings.Contains(text, "timeout") || strings.Contains(text, "timed out"):
		return analyzer.OutcomeTimeout
	case strings.Contains(text, "cancel"):
		return analyzer.OutcomeCancelled
	case strings.Contains(text, "circuit") || strings.Contains(text, "breaker") || strings.Contains(text, "budget"):
		return analyzer.OutcomeRefused
	}
	return analyzer.OutcomeRetryable
}

// StatusText is the outcome key used in DependencyStats.Outcomes: the status when there is one,
// otherwise the class ("timeout", "connect error", ...).
func statusKey(outcome, status string) string {
	if status != "" {
		return status
	}
	if outcome == analyzer.OutcomeRetryable {
		return "connect error"
	}
	return outcome
}

func isRedirect(status string) bool { return len(status) == 3 && status[0] == '3' }
