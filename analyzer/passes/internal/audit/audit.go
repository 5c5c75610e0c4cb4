package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/policy"
	"github.com/stormwatch/stormwatch/spans"
)

// builtin is the policy of a run configured without one. It is read, never written: detectors
// only look rules up, so sharing it costs nothing and saves building one per trace.
var builtin = policy.Default()

// Policy is the policy the run was configured with (policy.Configure sets it as the run's
// policy.RunPolicy), or the built-in defaults.
func Policy(s analyzer.RunSettings) *policy.Policy {
	if p, ok := policy.RunPolicy.Get(s); ok && p != nil {
		return p
	}
	return builtin
}

// Classes looks the classes of one trace's operations up under one policy (or of a window's,
// with no trace, where the route is unknown). A policy without classes (the built-in one, and any
// file that declares none) answers its defaults whatever the key, so no key is made; and the route
// is read only when a class matches on routes, since a class without a route pattern matches any
// route.
//
// The route is the nearest SERVER span's at or above an operation's caller span, and each span's
// nearest SERVER span is found once for the pass, from its parent's: a deep chain of INTERNAL
// spans under one SERVER span would otherwise cost its depth for each operation under it.
type Classes struct {
	p      *policy.Policy
	t      *analyzer.Trace
	routes bool    // some class of p matches on routes (and t is not nil)
	server []int32 // span i's nearest SERVER span at or above it, -1 for none; made on first use
}

// ClassesIn looks classes up under p (nil: the built-in defaults) for the operations of t (nil
// for a window's).
func ClassesIn(p *policy.Policy, t *analyzer.Trace) Classes {
	return Classes{p: p, t: t, routes: t != nil && matchesRoutes(p)}
}

// Of is op's class.
func (c *Classes) Of(op *analyzer.Operation) *policy.Class {
	if c.p != nil && len(c.p.Classes) == 0 {
		return &c.p.Defaults
	}
	k := policy.Key{Operation: op.Name, Service: op.Caller, Dependency: op.Dependency, DependencyService: op.DependencyService, Origin: firstOrigin(op)}
	if c.routes {
		k.Route = c.route(op.SpanID)
	}
	return c.p.Lookup(k)
}

// Class is op's class under p, for a detector without a trace (a window's operations, whose route
// is unknown).
func Class(p *policy.Policy, op *analyzer.Operation) *policy.Class {
	c := ClassesIn(p, nil)
	return c.Of(op)
}

// matchesRoutes reports whether any class of p matches on the route.
func matchesRoutes(p *policy.Policy) bool {
	if p == nil {
		return false
	}
	for i := range p.Classes {
		if p.Classes[i].Match.Route != "" {
			return true
		}
	}
	return false
}

// route is http.route, else the RPC method, of the nearest SERVER span at or above span id.
func (c *Classes) route(id spans.SpanID) string {
	i, ok := c.t.Lookup(id)
	if !ok {
		return ""
	}
	srv := c.nearestServer(i)
	if srv < 0 {
		return ""
	}
	s := &c.t.Spans[srv]
	if r := s.Str(spans.AttrHTTPRoute); r != "" {
		return r
	}
	return s.Str(spans.AttrRPCMethod)
}

// unknown marks a span whose nearest SERVER span is not found yet.
const unknown = -2

// nearestServer is the nearest SERVER span at or above span i, -1 for none. It walks up only to
// the first span already answered, then answers every span it passed: each span is walked over
// once in the pass, however many operations are asked about.
func (c *Classes) nearestServer(i int) int {
	if c.server == nil {
		c.server = make([]int32, c.t.Len())
		for j := range c.server {
			c.server[j] = unknown
		}
	}
	j, found := i, -1
	for j >= 0 && c.server[j] == unknown {
		if c.t.Spans[j].Kind == spans.KindServer {
			found = j
			break
		}
		j = c.t.Parent(j)
	}
	if j >= 0 && found < 0 {
		found = int(c.server[j]) // answered before
	}
	// Every span from i up to (not including) j has found as its answer; j itself too when it is
	// the SERVER span.
	for k := i; k >= 0 && c.server[k] == unknown; k = c.t.Parent(k) {
		c.server[k] = int32(found)
		if k == found {
			break
		}
	}
	return found
}

// FromFile reports whether a setting was written in a policy file (not a built-in default).
func FromFile[T any](s policy.Setting[T]) bool { return s.Set && !s.Pos.IsZero() }

// Cite adds the rule and its place to a finding's evidence when the rule came from a file, and
// returns a suffix for the summary such as " (policy maxAttempts: 3 at policy.yaml:12)".
func Cite[T any](ev analyzer.Evidence, rule string, s policy.Setting[T], shown string) string {
	if !FromFile(s) {
		return ""
	}
	ev["rule"] = analyzer.Text(rule)
	ev["policy"] = analyzer.Text(s.Pos.FileLine())
	return fmt.Sprintf(" (policy %s: %s at %s)", rule, shown, s.Pos.FileLine())
}

// Span returns the span with id, or nil.
func Span(t *analyzer.Trace, id spans.SpanID) *spans.Span {
	if t == nil {
		return nil
	}
	if i, ok := t.Lookup(id); ok {
		return &t.Spans[i]
	}
	return nil
}

// Carries reports whether any span of t has an attribute named by one of keys: the cheap first
// look of a detector whose evidence is such an attribute on an attempt's span, so that a trace
// without one (most traffic) costs no span lookup per attempt. The well-known keys are answered
// from the analyzer's index ([analyzer.Trace.CarriesAttr]), not by a pass over the attributes.
func Carries(t *analyzer.Trace, keys ...string) bool {
	if t == nil {
		return false
	}
	for _, k := range keys {
		if t.CarriesAttr(k) {
			return true
		}
	}
	return false
}

// Method is the HTTP method of a call, upper case, or "".
func Method(s *spans.Span) string {
	a, ok, legacy, okLegacy := either(s, spans.AttrHTTPMethod, spans.AttrLegacyHTTPMethod)
	m := str(a, ok)
	if m == "" {
		m = str(legacy, okLegacy)
	}
	return strings.ToUpper(m)
}

// IdempotencyKey is the call's idempotency key (resilience.idempotency_key, or the captured
// Idempotency-Key request header), "" when none.
func IdempotencyKey(s *spans.Span) string {
	a, ok, header, okHeader := either(s, spans.AttrIdempotencyKey, spans.AttrReqHeaderIdempotencyKey)
	if k := str(a, ok); k != "" {
		return k
	}
	return str(header, okHeader)
}

// either finds the first attribute named k1 and the first named k2 in one scan of the span's
// attributes, as s.Attr(k1) and s.Attr(k2) would in two: a reference-client span carries a
// dozen or more, and the readers above want one of two names.
func either(s *spans.Span, k1, k2 string) (a1 spans.Attr, ok1 bool, a2 spans.Attr, ok2 bool) {
	for i := range s.Attrs {
		if k := s.Attrs[i].Key; !ok1 && k == k1 {
			a1, ok1 = s.Attrs[i], true
		} else if !ok2 && k == k2 {
			a2, ok2 = s.Attrs[i], true
		}
		if ok1 && ok2 {
			break
		}
	}
	return a1, ok1, a2, ok2
}

// Strs is s.Str(k1), s.Str(k2) in one scan of the attributes.
func Strs(s *spans.Span, k1, k2 string) (string, string) {
	a1, ok1, a2, ok2 := either(s, k1, k2)
	return str(a1, ok1), str(a2, ok2)
}

// str is what s.Str returns for an attribute found (ok) or not.
func str(a spans.Attr, ok bool) string {
	if !ok {
		return ""
	}
	return a.AsString()
}

// HashKey shows an idempotency key without revealing it: the first 12 hex digits of its SHA-256.
func HashKey(k string) string {
	sum := sha256.Sum256([]byte(k))
	return "sha256:" + hex.EncodeToString(sum[:6])
}

// RetryAfter is the server's Retry-After hint on a call, in nanoseconds: resilience.retry_after_ms,
// or the captured Retry-After response header (delay-seconds or an HTTP-date, read relative to the
// span's end). ok is false when there is none.
func RetryAfter(s *spans.Span) (int64, bool) {
	// One scan of the attributes for resilience.retry_after_ms (read two ways) and the header.
	a, ok, header, okHeader := either(s, spans.AttrRetryAfter, spans.AttrResHeaderRetryAfter)
	if ok {
		if ms, ok := a.AsInt(); ok && ms >= 0 {
			return ms * int64(time.Millisecond), true
		}
		if a.Type == spans.ValueDouble && a.Float() >= 0 {
			return int64(a.Float() * float64(time.Millisecond)), true
		}
	}
	h := strings.TrimSpace(str(header, okHeader))
	if h == "" {
		return 0, false
	}
	// Captured headers arrive as a one-element array shown as ["120"] by some instrumentations.
	h = strings.Trim(h, `[]" `)
	if n, err := strconv.ParseInt(h, 10, 64); err == nil && n >= 0 {
		return n * int64(time.Second), true
	}
	if at, err := time.Parse(time.RFC1123, h); err == nil {
		d := at.UnixNano() - s.EndUnixNano
		return max(d, 0), true
	}
	return 0, false
}

// IDs renders span ids for a finding.
func IDs(ids ...spans.SpanID) []string { return HexIDs(ids) }

// HexIDs renders span ids for a finding, as SpanID.String does each, with two allocations in
// all (the slice, and one string the ids are cut from) instead of one or two per id.
func HexIDs(ids []spans.SpanID) []string {
	if len(ids) == 0 {
		return []string{}
	}
	const n = 2 * len(spans.SpanID{})
	var b strings.Builder
	b.Grow(n * len(ids))
	var buf [n]byte
	for _, id := range ids {
		hex.Encode(buf[:], id[:])
		b.Write(buf[:])
	}
	all := b.String()
	out := make([]string, len(ids))
	for i := range out {
		out[i] = all[i*n : (i+1)*n]
	}
	return out
}

// AttemptIDs renders the span ids of op's attempts that keep accepts, in order, as HexIDs does;
// nil when none is kept.
func AttemptIDs(op *analyzer.Operation, keep func(*analyzer.Attempt) bool) []string {
	var buf [16]spans.SpanID
	ids := buf[:0]
	for i := range op.Attempts {
		if keep(&op.Attempts[i]) {
			ids = append(ids, op.Attempts[i].SpanID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	return HexIDs(ids)
}

// Ms renders nanoseconds as milliseconds for evidence, rounded to 0.1 ms.
func Ms(ns int64) float64 { return float64(ns/100_000) / 10 }

// IsRetry reports whether attempt a is a try of the retry loop after the first (not the first,
// a hedge, a fan-out copy, a resend after a redirect or 401, or a fallback).
func IsRetry(a *analyzer.Attempt) bool {
	switch a.Kind {
	case analyzer.KindRetry:
		return true
	case analyzer.KindInitial, analyzer.KindHedge, analyzer.KindFanout, analyzer.KindFallback, analyzer.AttemptKindResend:
		return false
	}
	return a.Number > 1
}

// NoRetries reports whether the policy allows the class no retry at all (maxAttempts 1). Rules
// about how to retry - pauses, jitter, Retry-After - cannot apply to it: a retry there is already
// one too many, which unbounded-retries reports, and advice on pacing it would ask for a retry the
// policy forbids.
func NoRetries(c *policy.Class) bool { return c != nil && c.MaxAttempts.Value == 1 }

// BackoffAdvice is the pause to ask for: the class's declared backoff when the policy file sets
// one (so the advice never contradicts it), else exponential backoff with full jitter.
func BackoffAdvice(c *policy.Class) string {
	if c == nil || !FromFile(c.Backoff) {
		return "exponential backoff with full jitter, sleep uniform(0, min(cap, base*2^n))"
	}
	b := c.Backoff.Value
	jitter := b.Jitter + " jitter"
	switch {
	case b.Jitter == "":
		jitter = fmt.Sprintf("jitter +-%g%%", b.JitterRatio*100)
	case b.Jitter == policy.JitterNone:
		jitter = "no jitter"
	}
	return fmt.Sprintf("the policy's backoff (base %s, cap %s, %s, at %s)", b.Base, b.Cap, jitter, c.Backoff.Pos.FileLine())
}

// firstOrigin is the address op's first call went to ("" for none): a policy may still match a
// dependency by its scheme://host:port.
func firstOrigin(op *analyzer.Operation) string {
	for i := range op.Attempts {
		if len(op.Attempts[i].Origins) > 0 {
			return op.Attempts[i].Origins[0]
		}
	}
	return ""
}
