package reference

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"strconv"
	"strings"

	"github.com/stormwatch/stormwatch/spans"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	noopmetric "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	nooptrace "go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of the client's spans and metrics.
const ScopeName = "github.com/stormwatch/stormwatch/reference"

// tracerFrom returns nil when tp records nothing, so a no-op provider costs no span bookkeeping.
func tracerFrom(tp trace.TracerProvider) trace.Tracer {
	switch tp.(type) {
	case nil, nooptrace.TracerProvider, *nooptrace.TracerProvider:
		return nil
	}
	return tp.Tracer(ScopeName)
}

// instruments are the client's metrics; nil when no meter provider records.
type instruments struct {
	operations      metric.Int64Counter
	attempts        metric.Int64Counter
	retries         metric.Int64Counter
	hedges          metric.Int64Counter
	budgetRefusals  metric.Int64Counter
	breakerRefusals metric.Int64Counter
	transitions     metric.Int64Counter
	breakerState    metric.Int64Gauge
}

func newInstruments(mp metric.MeterProvider) (*instruments, error) {
	switch mp.(type) {
	case nil, noopmetric.MeterProvider, *noopmetric.MeterProvider:
		return nil, nil
	}
	m := mp.Meter(ScopeName)
	var in instruments
	var err error
	mk := func(dst *metric.Int64Counter, name, desc string) {
		if err != nil {
			return
		}
		*dst, err = m.Int64Counter(name, metric.WithDescription(desc), metric.WithUnit("{"+strings.TrimPrefix(name, "resilience.client.")+"}"))
	}
	mk(&in.operations, "resilience.client.operations", "Logical calls, by stop reason.")
	mk(&in.attempts, "resilience.client.attempts", "Physical attempts, by outcome.")
	mk(&in.retries, "resilience.client.retries", "Retries sent (attempts after the first).")
	mk(&in.hedges, "resilience.client.hedges", "Hedged copies sent.")
	mk(&in.budgetRefusals, "resilience.client.budget.refusals", "Retries and hedges the retry budget refused.")
	mk(&in.breakerRefusals, "resilience.client.breaker.refusals", "Calls refused by an open circuit breaker.")
	mk(&in.transitions, "resilience.client.breaker.transitions", "Circuit breaker state changes, by from and to.")
	if err == nil {
		in.breakerState, err = m.Int64Gauge("resilience.client.breaker.state",
			metric.WithDescription("Circuit breaker state per origin: 0 closed, 1 half_open, 2 open."))
	}
	if err != nil {
		return nil, err
	}
	return &in, nil
}

func originAttrs(k originKey) []attribute.KeyValue {
	port, _ := strconv.Atoi(k.port)
	return []attribute.KeyValue{attribute.String(spans.AttrServerAddress, k.host), attribute.Int(spans.AttrServerPort, port)}
}

func (in *instruments) add(ctx context.Context, c metric.Int64Counter, k originKey, extra ...attribute.KeyValue) {
	if in == nil {
		return
	}
	c.Add(ctx, 1, metric.WithAttributes(append(originAttrs(k), extra...)...))
}

func (in *instruments) transition(ctx context.Context, k originKey, tr *transition) {
	if in == nil || tr == nil {
		return
	}
	in.transitions.Add(ctx, 1, metric.WithAttributes(append(originAttrs(k),
		attribute.String("resilience.breaker.from", tr.from.String()),
		attribute.String("resilience.breaker.to", tr.to.String()))...))
	in.breakerState.Record(ctx, int64(tr.to), metric.WithAttributes(originAttrs(k)...))
}

// hashKey is how an idempotency key appears in spans: never the raw value, which may be a secret
// or personal data, but a short stable digest that still shows whether attempts shared one key.
func hashKey(k string) string {
	if k == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(k))
	return "sha256:" + hex.EncodeToString(sum[:8])
}

// HashIdempotencyKey is the form of an idempotency key in spans, for tests and readers that want to
// match a key they hold against a trace.
func HashIdempotencyKey(k string) string { return hashKey(k) }

// sensitiveQuery are query parameters whose values never reach a span.
var sensitiveQuery = map[string]bool{
	"awsaccesskeyid": true, "signature": true, "sig": true, "x-goog-signature": true, "x-amz-signature": true,
	"token": true, "access_token": true, "api_key": true, "apikey": true, "key": true, "password": true, "secret": true,
}

// redactURL is url.full for a span: no user info, and the values of credential-like query
// parameters replaced, as the HTTP semantic conventions ask.
func redactURL(u *url.URL) string {
	if u.User == nil && u.RawQuery == "" {
		return u.String()
	}
	c := *u
	c.User = nil
	if c.RawQuery != "" {
		parts := strings.Split(c.RawQuery, "&")
		for i, p := range parts {
			k, _, hasV := strings.Cut(p, "=")
			name, err := url.QueryUnescape(k)
			if err != nil {
				name = k
			}
			if hasV && sensitiveQuery[strings.ToLower(name)] {
				parts[i] = k + "=REDACTED"
			}
		}
		c.RawQuery = strings.Join(parts, "&")
	}
	return c.String()
}
