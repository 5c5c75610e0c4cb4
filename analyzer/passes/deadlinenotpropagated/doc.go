// Package deadlinenotpropagated defines the deadline-not-propagated detector.
//
// It proves that a deadline stopped at a service boundary or was stretched on the way down:
//   - an attempt that ran past its own operation's deadline (resilience.deadline), or longer than
//     the budget it started with (resilience.deadline.remaining_ms): its own timeout exceeded what
//     was left (four attempts of 2 s do not fit a 2 s budget:
//     docs/principles.md#one-budget-one-owner);
//   - a downstream operation whose deadline is later than its caller's (a layer that started its
//     own clock instead of inheriting the remaining budget);
//   - a downstream operation recorded by the reference client with no deadline at all while its
//     caller had one (docs/principles.md#retry-cost: the deadline protects the caller, not the
//     dependency, until it travels with the request).
//
// Deadlines are absolute times written by different services, so comparisons across services
// allow the clock-skew tolerance.
//
// Evidence: kind (attempt-outlived-deadline, later-than-caller, not-propagated), deadline_ms /
// caller_deadline_ms (relative to the operation's start), overrun_ms.
//
// Needs the reference attributes (resilience.deadline): stock instrumentation records no
// deadline. The stock-only signal of the same defect - callees working after the caller gave up -
// is post-deadline-work.
//
// False positives: a downstream call that is deliberately asynchronous (work queued for later) -
// give it its own operation class with its own deadline in the policy and accept the finding, or
// detach it from the request's trace.
//
// Seeds: 000 (deadline propagation), 002 (one budget for the whole operation), 004.
package deadlinenotpropagated
