// Package unboundedfanout defines the unbounded-fanout detector.
//
// It proves that one attempt of a logical operation reached more origins than allowed: the case of
// docs/principles.md#intents-and-attempts where read-01's retry shows up on primary-b and primary-c
// although the policy says maxFanout 1. With stock instrumentation the copies are overlapping
// sibling CLIENT spans toward different origins (different host:port, or SERVER spans of one
// service.name with different service.instance.id); with the reference client they share
// resilience.attempt or are marked resilience.attempt.kind=fanout. Hedges (copies to the same
// origin, or attempts the reference client marks as hedge) are not fan-out.
//
// Evidence: fanout (origins the attempt reached), limit (the maxFanout of the operation's policy
// class, else the detector's own maxFanout setting, default 1), targets (the origins).
//
// Severity: warning.
//
// False positives: stock instrumentation cannot tell a hedge sent to a second replica from
// fan-out; raise the limit for hedged operations in the policy.
package unboundedfanout
