// Package alerts turns a retry policy into Prometheus alerting rules over stormwatch's own
// metrics (analyzer/metrics and the collector's series): amplification above a class's limit
// (maxAttempts x maxFanout) per dependency and caller, work after a caller gave up, retry budgets
// exceeded, and a collector that refuses or drops spans. Each alert carries labels that route it
// (severity, dependency, caller) and annotations that say what to look at and what to change.
//
// It does no I/O: Rules renders the rule file as YAML bytes; `stormwatch policy alerts` writes
// them. The rules are checked by promtool and fired by a real Prometheus in the command's tests.
package alerts
