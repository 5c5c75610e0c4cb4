// Package postdeadline defines the post-deadline-work detector.
//
// It proves that work started for a caller that had already given up: calls (CLIENT spans) that
// started after their operation's deadline (resilience.deadline, deadline_source "explicit"), or
// downstream calls a callee started after its caller's CLIENT span had ended in a timeout or a
// cancellation (deadline_source "caller-gave-up"). The second needs no attributes of ours: a
// CLIENT span with error status and no status code (context deadline exceeded), and a SERVER
// child whose own calls start after it ended - a closed last span over a growing queue
// (docs/principles.md#intents-and-attempts), an origin that still did all 40 requests
// (docs/principles.md#retry-cost).
//
// Clocks of different services drift by tens of milliseconds, so every callee's times are first
// read on its caller's clock: its SERVER span is set to start when its CLIENT parent did, and the
// spans below move with it (its duration is kept). RunSettings.SkewTolerance more is allowed before
// a call counts as late.
//
// The finding names the worker: the service that went on after the caller stopped waiting (the
// callee whose SERVER span received the call, or, for an explicit deadline, the service that made
// the late calls), and how long it went on past that point.
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
