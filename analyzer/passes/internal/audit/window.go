package audit

import (
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/policy"
)

// Window is what a windowed detector judged: the operations, and the time they span.
type Window struct {
	Ops        []*analyzer.Operation
	StartNanos int64
	EndNanos   int64
}

// Windowed selects the operations a cross-trace detector looks at: offline every operation held
// (the whole input), live only those that ended within the policy's window before the latest one.
// The analyzer bounds what is held (MaxSpans), so this never grows without limit.
func Windowed(pass *analyzer.Pass) Window {
	ops := pass.Operations
	var latest int64
	for _, op := range ops {
		latest = max(latest, op.EndUnixNano)
	}
	w := Window{Ops: ops, EndNanos: latest}
	if d := policy.Window(pass.Settings); d > 0 {
		from := latest - int64(d)
		kept := make([]*analyzer.Operation, 0, len(ops))
		for _, op := range ops {
			if op.EndUnixNano >= from {
				kept = append(kept, op)
			}
		}
		w.Ops = kept
	}
	w.StartNanos = latest
	for _, op := range w.Ops {
		w.StartNanos = min(w.StartNanos, op.StartUnixNano)
	}
	return w
}

// Evidence adds the window to a finding's evidence: its bounds (RFC 3339, UTC) and length.
func (w Window) Evidence(ev map[string]any) {
	ev["window_start"] = time.Unix(0, w.StartNanos).UTC().Format(time.RFC3339Nano)
	ev["window_end"] = time.Unix(0, w.EndNanos).UTC().Format(time.RFC3339Nano)
	ev["window_ms"] = Ms(w.EndNanos - w.StartNanos)
}
