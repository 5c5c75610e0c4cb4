package nobackoff

import (
	"fmt"
	"slices"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/passes/internal/audit"
	"github.com/stormwatch/stormwatch/internal/words"
)

// Detector is the no-backoff detector.
var Detector = &analyzer.Detector{
	Name:     name,
	Title:    "Retries with no pause",
	Doc:      "a retrying layer whose pauses between attempts (two or more, over its operations in the trace) are the client's own turnaround: their median under minPause (default 5 ms), none as long as 4 x minPause; evidence: retries, immediate_retries, pauses_ms, threshold_ms",
	Severity: analyzer.SeverityWarning,
	Settings: &Settings{MinPause: 5 * time.Millisecond},
	Run:      run,
}

const name = "no-backoff"

// Settings are no-backoff's own (analyzer.Detector.Settings).
type Settings struct {
	// MinPause is the pause under which a retry came back without waiting: what a client takes
	// to turn a failed answer into the next attempt when its delay is zero - a few milliseconds on
	// an event loop (Node's setTimeout(0) and promise chain), well under any deliberate backoff.
	MinPause time.Duration `policy:"minPause" doc:"a retry whose pause is under it came back without waiting (the client's own turnaround)" min:"0s"`
}

// layer is one retrying layer of the trace: the operations of one owner toward one dependency.
type layer struct {
	owner, dependency string
	ops               []*analyzer.Operation
}

// run judges each layer's pauses together, not one by one: a zero-delay default shows as pauses
// of the client's own turnaround on every retry (1-4 ms on Node's event loop, now and then more
// when the process is busy), full jitter as a spread from near zero up to its cap. So a layer is
// reported when it retried at least twice, its typical pause (the median) is under minPause, and
// none is as long as a backoff's cap would be (spreadFactor x minPause): a few near-zero draws of
// full jitter beside its long ones are not reported, nor is any layer that waited in earnest.
func run(pass *analyzer.Pass) error {
	minPause := int64(analyzer.SettingsOf[Settings](pass).MinPause)
	p := audit.Policy(pass.RunSettings)
	classes := audit.ClassesIn(p, pass.Trace)
	var buf [4]layer
	layers := buf[:0]
	// A few layers a trace, found by a scan; past 16 (a trace retrying toward as many
	// dependencies) by a map, so that finding an operation's layer costs no scan of them all.
	type key struct{ owner, dependency string }
	var byKey map[key]int
	for _, op := range pass.Operations {
		cls := classes.Of(op)
		if audit.NoRetries(cls) {
			continue // the policy allows no retry here: unbounded-retries says so, not how to pace one
		}
		measured := 0
		for i := range op.Attempts {
			if a := &op.Attempts[i]; audit.IsRetry(a) && a.BackoffNanos >= 0 {
				measured++
			}
		}
		if measured == 0 {
			continue // no pause measured: no evidence either way
		}
		k := -1
		if byKey != nil {
			if j, ok := byKey[key{op.Owner, op.Dependency}]; ok {
				k = j
			}
		} else {
			for j := range layers {
				if layers[j].owner == op.Owner && layers[j].dependency == op.Dependency {
					k = j
					break
				}
			}
		}
		if k < 0 {
			layers = append(layers, layer{owner: op.Owner, dependency: op.Dependency})
			k = len(layers) - 1
			if byKey != nil {
				byKey[key{op.Owner, op.Dependency}] = k
			} else if len(layers) > 16 {
				byKey = make(map[key]int, 64)
				for j := range layers {
					byKey[key{layers[j].owner, layers[j].dependency}] = j
				}
			}
		}
		layers[k].ops = append(layers[k].ops, op)
	}
	for _, l := range layers {
		var pauses []float64
		var ids []string
		immediate := 0
		longest := int64(0)
		for _, op := range l.ops {
			for i := range op.Attempts {
				a := &op.Attempts[i]
				if !audit.IsRetry(a) || a.BackoffNanos < 0 {
					continue // a pause not measured is no evidence either way
				}
				pauses = append(pauses, audit.Ms(a.BackoffNanos))
				longest = max(longest, a.BackoffNanos)
				if a.BackoffNanos < minPause {
					immediate++
					ids = append(ids, a.SpanID.String())
				}
			}
		}
		if len(pauses) < 2 || longest >= spreadFactor*minPause {
			continue
		}
		typical := median(pauses)
		if typical >= audit.Ms(minPause) {
			continue
		}
		op := l.ops[0]
		pass.Report(analyzer.Finding{
			Severity:   pass.Detector.Severity,
			SpanIDs:    ids,
			Service:    l.owner,
			Dependency: l.dependency,
			Summary: fmt.Sprintf("%s retried %s %s with no pause (typical pause %.1f ms, none over %.1f ms: the client's own turnaround, not a wait)",
				l.owner, op.Name, words.Plural(len(pauses), "time", "times"), typical, audit.Ms(longest)),
			Action: "wait between attempts: " + audit.BackoffAdvice(classes.Of(op)),
			Evidence: analyzer.Evidence{
				"retries":           analyzer.Int(len(pauses)),
				"immediate_retries": analyzer.Int(immediate),
				"pauses_ms":         analyzer.Floats(pauses),
				"threshold_ms":      analyzer.Float(audit.Ms(minPause)),
			},
		})
	}
	return nil
}

// spreadFactor bounds the longest pause of a layer that did not wait, in units of minPause: a
// turnaround now and then slowed by a busy process stays under it, a backoff's cap does not.
const spreadFactor = 4

// median of a small list of pauses (sorted in a copy: the evidence keeps their order).
func median(pauses []float64) float64 {
	p := slices.Sorted(slices.Values(pauses))
	n := len(p)
	if n%2 == 1 {
		return p[n/2]
	}
	return (p[n/2-1] + p[n/2]) / 2
}
