package nobackoff

import (
	"slices"
	"strconv"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/passes/internal/audit"
	"github.com/stormwatch/stormwatch/internal/words"
	"github.com/stormwatch/stormwatch/spans"
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

// layer is one retrying layer of the trace: the operations of one owner toward one dependency,
// chained through next from first to last, and what the first look at their pauses found.
type layer struct {
	owner, dependency string
	first, last       int32 // indexes into the pass's operations
	// retries counts the measured pauses, below those under minPause in the evidence's unit
	// (tenths of a millisecond), longest is the longest one.
	retries, below int
	longest        int64
}

// run judges each layer's pauses together, not one by one: a zero-delay default shows as pauses
// of the client's own turnaround on every retry (1-4 ms on Node's event loop, now and then more
// when the process is busy), full jitter as a spread from near zero up to its cap. So a layer is
// reported when it retried at least twice, its typical pause (the median) is under minPause, and
// none is as long as a backoff's cap would be (spreadFactor x minPause): a few near-zero draws of
// full jitter beside its long ones are not reported, nor is any layer that waited in earnest.
//
// During an incident every trace may draw a finding, so the first walk only counts: a layer whose
// pauses cannot have a median under minPause (fewer than half of them under it) or has a long one
// is dropped before anything is built, and only a reported layer's pauses, span ids and texts are
// made, each once and at its size.
func run(pass *analyzer.Pass) error {
	minPause := int64(analyzer.SettingsOf[Settings](pass).MinPause)
	threshold := audit.Ms(minPause)
	p := audit.Policy(pass.RunSettings)
	classes := audit.ClassesIn(p, pass.Trace)
	var buf [4]layer
	layers := buf[:0]
	// next chains each layer's operations (-1 ends a chain), kept on the stack for most traces.
	var nextBuf [64]int32
	var next []int32
	// A few layers a trace, found by a scan; past 16 (a trace retrying toward as many
	// dependencies) by a map, so that finding an operation's layer costs no scan of them all.
	type key struct{ owner, dependency string }
	var byKey map[key]int
	for i, op := range pass.Operations {
		cls := classes.Of(op)
		if audit.NoRetries(cls) {
			continue // the policy allows no retry here: unbounded-retries says so, not how to pace one
		}
		retries, below, longest := 0, 0, int64(0)
		for j := range op.Attempts {
			if a := &op.Attempts[j]; audit.IsRetry(a) && a.BackoffNanos >= 0 {
				retries++
				longest = max(longest, a.BackoffNanos)
				if audit.Ms(a.BackoffNanos) < threshold {
					below++
				}
			}
		}
		if retries == 0 {
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
		if next == nil {
			next = nextBuf[:0]
			if len(pass.Operations) > len(nextBuf) {
				next = make([]int32, 0, len(pass.Operations))
			}
		}
		next = next[:i+1]
		next[i] = -1
		if k < 0 {
			layers = append(layers, layer{owner: op.Owner, dependency: op.Dependency, first: int32(i), last: int32(i)})
			k = len(layers) - 1
			if byKey != nil {
				byKey[key{op.Owner, op.Dependency}] = k
			} else if len(layers) > 16 {
				byKey = make(map[key]int, 64)
				for j := range layers {
					byKey[key{layers[j].owner, layers[j].dependency}] = j
				}
			}
		} else {
			next[layers[k].last] = int32(i)
			layers[k].last = int32(i)
		}
		l := &layers[k]
		l.retries += retries
		l.below += below
		l.longest = max(l.longest, longest)
	}
	for k := range layers {
		l := &layers[k]
		// The median is under minPause only if the lower middle pause is: at least half of them,
		// rounded up, are.
		if l.retries < 2 || l.longest >= spreadFactor*minPause || l.below < (l.retries+1)/2 {
			continue
		}
		var pauseBuf [32]float64
		var idBuf [16]spans.SpanID
		pauses, ids := pauseBuf[:0], idBuf[:0]
		for i := l.first; i >= 0; i = next[i] {
			op := pass.Operations[i]
			for j := range op.Attempts {
				a := &op.Attempts[j]
				if !audit.IsRetry(a) || a.BackoffNanos < 0 {
					continue // a pause not measured is no evidence either way
				}
				pauses = append(pauses, audit.Ms(a.BackoffNanos))
				if a.BackoffNanos < minPause {
					ids = append(ids, a.SpanID)
				}
			}
		}
		typical := median(pauses)
		if typical >= threshold {
			continue
		}
		op := pass.Operations[l.first]
		// The summary and the action are cut from one string.
		var textBuf [320]byte
		b := append(textBuf[:0], l.owner...)
		b = append(b, " retried "...)
		b = append(b, op.Name...)
		b = append(b, ' ')
		b = append(b, words.Plural(len(pauses), "time", "times")...)
		b = append(b, " with no pause (typical pause "...)
		b = strconv.AppendFloat(b, typical, 'f', 1, 64)
		b = append(b, " ms, none over "...)
		b = strconv.AppendFloat(b, audit.Ms(l.longest), 'f', 1, 64)
		b = append(b, " ms: the client's own turnaround, not a wait)"...)
		cut := len(b)
		b = append(b, "wait between attempts: "...)
		b = append(b, audit.BackoffAdvice(classes.Of(op))...)
		text := string(b)
		pass.Report(analyzer.Finding{
			Severity:   pass.Detector.Severity,
			SpanIDs:    audit.HexIDs(ids),
			Service:    l.owner,
			Dependency: l.dependency,
			Summary:    text[:cut],
			Action:     text[cut:],
			Evidence: analyzer.Evidence{
				"retries":           analyzer.Int(len(pauses)),
				"immediate_retries": analyzer.Int(len(ids)),
				"pauses_ms":         analyzer.Floats(slices.Clone(pauses)),
				"threshold_ms":      analyzer.Float(threshold),
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
	var buf [32]float64
	p := append(buf[:0], pauses...)
	slices.Sort(p)
	n := len(p)
	if n%2 == 1 {
		return p[n/2]
	}
	return (p[n/2-1] + p[n/2]) / 2
}
