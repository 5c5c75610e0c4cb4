// Package postdeadline defines the post-deadline-work detector.
//
// It proves that work started for a caller that had already given up: calls (CLIENT spans) that
// started after their operation's deadline (resilience.deadline, deadline_source "explicit"), or
// downstream calls a callee started after its caller gave up (deadline_source "caller-gave-up").
// The give-up is the driver's ([analyzer.Trace.GiveUp]), read from time whatever the CLIENT span's
// status says: its end, or an earlier deadline the request carried, when the span says timeout or
// cancelled or the callee's work outlasted the caller's wait. It needs no attributes of ours: a
// closed last span over a growing queue (docs/principles.md#intents-and-attempts), an origin that
// still did all 40 requests (docs/principles.md#retry-cost).
//
// Work meant to outlive the caller is never counted: the walk does not enter CONSUMER spans (a
// message outlives its publisher) and follows no links.
//
// Clocks of different services drift by tens of milliseconds, so every callee's times are first
// read on its caller's clock: its SERVER span is set to start when its CLIENT parent did, and the
// spans below move with it (its duration is kept). RunSettings.SkewTolerance more is allowed before
// a call counts as late.
//
// The finding names the worker: the service that went on after the caller stopped waiting - the
// deepest service that made late calls, so along a cancellation chain the one that ignored the
// cancellation rather than the middle one whose call was cancelled (for an explicit deadline, the
// service that made the late calls) - and how long it went on past that point.
//
// Evidence: spans_after_deadline (late calls), wasted_ms (how long the worker's work went on past
// the deadline or the give-up, on the aligned clock), deadline_source (explicit or
// caller-gave-up), worker (the service that did the work).
//
// Severity: warning. A callee that stops its downstream work when its caller gives up is healthy
// and is not reported; a callee that merely finishes a call already in flight is not either (only
// calls that start late count).
//
// False positives: deliberate fire-and-forget work (cache warming, audit writes) started from the
// request path looks the same; move it off the request's trace or accept the finding.
package postdeadline
