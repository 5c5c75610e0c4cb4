// Package lab re-runs the experiments behind stormwatch's rules (docs/principles.md) with the
// reference client against in-process origins (real HTTP servers on 127.0.0.1) with fault
// injection: latency, status sequences, refused connections, recovery at a time. Each scenario
// returns the experiment's table as rows; [Result.WriteText] prints it as a table and
// [Result.WriteJSON] as one object per row.
//
// By default a scenario runs on a fake clock (package fakeclock) that moves only when every caller
// and origin is waiting on it, so a 2 s origin or a 5 s breaker recovery takes no real time and
// the figures are exact and repeatable; Options.Realtime runs on the wall clock instead. [Record]
// writes a scenario's spans to any SDK exporter: that is how fixtures/lab-<scenario>.jsonl are made.
//
// Nothing a run starts outlives it: origins' work and callers' calls run under the run's context,
// which the end of the run (or the caller's cancellation, after which [Run] returns promptly)
// cancels; the fake clock is then closed and the servers shut. The lab never writes to stderr or
// the standard log: its servers log to Options.Logger, or nowhere.
package lab
