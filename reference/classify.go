package reference

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"time"
)

// Outcome is what one attempt came to (resilience.outcome).
type Outcome uint8

const (
	OutcomeOK        Outcome = iota // a response worth returning: status < 400
	OutcomeRetryable                // transient: a retryable status, a connect error, a reset
	OutcomePermanent                // repeating cannot help: other 4xx, 5xx not in RetryOn, TLS
	OutcomeTimeout                  // the attempt ran out of time
	OutcomeCancelled                // the caller gave up
	OutcomeRefused                  // refused by the breaker or the budget before any call
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"ok", "retryable", "permanent", "timeout", "cancelled", "refused"}

func (o Outcome) String() string {
	if o < numOutcomes {
		return outcomeNames[o]
	}
	return "unknown"
}

// class is the full verdict on one attempt.
type class struct {
	outcome Outcome
	// errType is error.type: the status code for HTTP errors, a low-cardinality name for
	// transport errors, "" on success.
	errType string
	// trips says whether the breaker counts it as the dependency failing.
	trips bool
}

// classify judges one attempt. attemptCtx is the attempt's context, opCtx the operation's, so a
// timeout of the attempt (retryable while budget is left) is told from the end of the operation's
// budget and from the caller's cancellation.
func classify(resp *http.Response, err error, retryOn []int, attemptCtx, opCtx context.Context, callerCtx context.Context) class {
	if err == nil {
		s := resp.StatusCode
		switch {
		case s < 400:
			return class{outcome: OutcomeOK}
		case containsInt(retryOn, s) && !neverRetry[s]:
			return class{outcome: OutcomeRetryable, errType: statusText(s), trips: s >= 500}
		default:
			return class{outcome: OutcomePermanent, errType: statusText(s), trips: s >= 500}
		}
	}
	if callerCtx.Err() != nil && !errors.Is(context.Cause(callerCtx), context.DeadlineExceeded) {
		return class{outcome: OutcomeCancelled, errType: "cancelled"}
	}
	if opCtx.Err() != nil || attemptCtx.Err() != nil || isTimeout(err) {
		return class{outcome: OutcomeTimeout, errType: "timeout", trips: true}
	}
	return classifyTransport(err)
}

// classifyTransport names a transport error and says whether repeating it may help.
func classifyTransport(err error) class {
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		if dnsErr.IsNotFound {
			return class{outcome: OutcomePermanent, errType: "dns_error", trips: true}
		}
		return class{outcome: OutcomeRetryable, errType: "dns_error", trips: true}
	}
	var certErr *tls.CertificateVerificationError
	var unknownAuth x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var recordErr tls.RecordHeaderError
	if errors.As(err, &certErr) || errors.As(err, &unknownAuth) || errors.As(err, &hostErr) || errors.As(err, &recordErr) {
		return class{outcome: OutcomePermanent, errType: "tls_error", trips: true}
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		return class{outcome: OutcomeRetryable, errType: "connect_error", trips: true}
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return class{outcome: OutcomeRetryable, errType: "connect_error", trips: true}
	}
	if errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, syscall.EPIPE) {
		return class{outcome: OutcomeRetryable, errType: "connection_reset", trips: true}
	}
	return class{outcome: OutcomePermanent, errType: "_OTHER", trips: true}
}

func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// statusText is strconv.Itoa without an allocation for the statuses seen every day.
func statusText(s int) string {
	switch s {
	case 400:
		return "400"
	case 401:
		return "401"
	case 403:
		return "403"
	case 404:
		return "404"
	case 409:
		return "409"
	case 422:
		return "422"
	case 429:
		return "429"
	case 500:
		return "500"
	case 502:
		return "502"
	case 503:
		return "503"
	case 504:
		return "504"
	}
	return strconv.Itoa(s)
}

// idempotentMethod reports the methods RFC 9110 section 9.2.2 calls idempotent.
func idempotentMethod(m string) bool {
	switch m {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// safeMethod reports the read-only methods, the only ones hedged.
func safeMethod(m string) bool {
	switch m {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions:
		return true
	}
	return false
}

// parseRetryAfter reads a Retry-After value, delta-seconds or an HTTP-date, as a wait from now.
// ok is false when the header is absent or unreadable.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0, false
		}
		if n > int64(24*time.Hour/time.Second) {
			n = int64(24 * time.Hour / time.Second)
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	if d < 0 {
		d = 0
	}
	return d, true
}

// backoffCeiling is min(cap, base*2^n) for retry n (0 for the first retry), without overflow.
func backoffCeiling(base, maxPause time.Duration, n int) time.Duration {
	d := base
	for i := 0; i < n; i++ {
		if d >= maxPause/2 {
			return maxPause
		}
		d *= 2
	}
	if d > maxPause {
		return maxPause
	}
	return d
}

// fullJitter draws the pause before retry n: uniform(0, min(cap, base*2^n)).
func fullJitter(base, maxPause time.Duration, n int, u float64) time.Duration {
	return time.Duration(u * float64(backoffCeiling(base, maxPause, n)))
}
