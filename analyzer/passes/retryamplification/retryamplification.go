package retryamplification

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/passes/internal/audit"
	"github.com/stormwatch/stormwatch/spans"
)

// Detector is the retry-amplification detector.
var Detector = &analyzer.Detector{
	Name:     "retry-amplification",
	Title:    "Retries multiplied across layers",
	Doc:      "two or more layers on one root-to-leaf path retried, multiplying the calls that reached the leaf dependency; evidence: factor, leaf_calls, layers, layers_not_listed, added_latency_ms",
	Severity: analyzer.SeverityWarning,
	Settings: &Settings{MinRetryingLayers: 2, CriticalFactor: 9},
	Run:      run,
}

// Settings are retry-amplification's own (analyzer.Detector.Settings).
type Settings struct {
	// MinRetryingLayers is how many retrying layers on one root-to-leaf path make it fire: one
	// layer retrying is not amplification (unbounded-retries judges it).
	MinRetryingLayers int `policy:"minRetryingLayers" doc:"retrying layers on one root-to-leaf path that make it fire" min:"2"`
	// CriticalFactor is the amplification factor (leaf calls per root request) from which a
	// finding is critical rather than a warning: two layers of three attempts each already
	// multiply a failing dependency's load by nine.
	CriticalFactor int `policy:"criticalFactor" doc:"leaf calls per root request from which a finding is critical, not a warning" min:"1"`
}

// maxSpanIDs bounds the span ids named by one finding: the factor says how many there were.
const maxSpanIDs = 100

// maxLayers bounds the retrying layers one finding lists, in its summary and its evidence: the half
// at the top and the half nearest the leaf, with the count of those between (layers_not_listed). A
// recursive service retrying at every level n deep has n leaves whose chains are up to n layers
// deep, and listing them all would make the report the square of the trace.
const maxLayers = 64

func run(pass *analyzer.Pass) error {
	set := analyzer.SettingsOf[Settings](pass)
	need := set.MinRetryingLayers
	if !mayFire(pass.Operations, need) {
		return nil
	}
	classes := audit.ClassesIn(audit.Policy(pass.RunSettings), pass.Trace)
	holes := anyInferred(pass.Trace, pass.Operations)
	for _, c := range analyzer.RetryingChains(pass.Operations, need, maxLayers/2) {
		layers, retrying := c.Ends, c.Retrying
		sev := analyzer.SeverityWarning
		if c.LeafCalls >= set.CriticalFactor {
			sev = analyzer.SeverityCritical
		}
		calls := make([]spans.SpanID, 0, c.LeafCalls) // LeafCalls counts them
		for _, op := range c.Leaves {
			for i := range op.Attempts {
				calls = append(calls, op.Attempts[i].Calls...)
			}
		}
		// Sorted as their hex strings would sort (lowercase hex keeps the bytes' order, and so do
		// big-endian integers), then rendered: only the ids the finding keeps become strings.
		slices.SortFunc(calls, func(a, b spans.SpanID) int {
			return cmp.Compare(binary.BigEndian.Uint64(a[:]), binary.BigEndian.Uint64(b[:]))
		})
		if len(calls) > maxSpanIDs {
			calls = calls[:maxSpanIDs]
		}
		var ids []string
		if len(calls) > 0 {
			ids = audit.HexIDs(calls)
		}
		unlisted := retrying - len(layers)
		parts := make([]string, len(layers))
		ev := make([]analyzer.Evidence, len(layers))
		var inferred map[string]hole
		if holes {
			inferred = inferredLayers(pass.Trace, &c)
		}
		var said []string
		for i, l := range layers {
			parts[i] = l.Service + " x" + strconv.Itoa(l.Attempts)
			ev[i] = analyzer.Evidence{"service": analyzer.Text(l.Service), "attempts": analyzer.Int(l.Attempts)}
			if h, ok := inferred[l.Service]; ok {
				ev[i]["inferred_from"] = analyzer.Text(h.callee + " SERVER spans")
				ev[i]["inferred_tries"] = analyzer.Int(h.inferred)
				said = append(said, fmt.Sprintf("%s %d of %d (%s's)", l.Service, h.inferred, h.tries, h.callee))
			}
		}
		if unlisted > 0 {
			parts = slices.Insert(parts, maxLayers/2, strconv.Itoa(unlisted)+" more")
		}
		hole := ""
		if len(said) > 0 {
			hole = "; tries with no span of their own were counted from the callee's SERVER spans: " + strings.Join(said, ", ")
		}
		dep := c.Dependency
		if c.Service != "" && c.Service != dep {
			dep = c.Service + " (" + c.Dependency + ")"
		}
		evidence := analyzer.Evidence{
			"factor":     analyzer.Int(c.LeafCalls),
			"leaf_calls": analyzer.Int(c.LeafCalls),
			"layers":     analyzer.Records(ev),
		}
		if unlisted > 0 {
			evidence["layers_not_listed"] = analyzer.Int(unlisted)
		}
		if ms, ok := addedLatency(pass.Trace, c.Leaves[0]); ok {
			evidence["added_latency_ms"] = analyzer.Float(ms)
		}
		pass.Report(analyzer.Finding{
			Severity:   sev,
			SpanIDs:    ids,
			Service:    layers[0].Service,
			Dependency: c.Dependency,
			Summary: fmt.Sprintf("%d layers retried (%s): %d calls to %s for 1 request%s",
				retrying, strings.Join(parts, ", "), c.LeafCalls, dep, hole),
			Action:   ownerAdvice(&classes, c, layers),
			Evidence: evidence,
		})
	}
	return nil
}

// addedLatency is the added latency, in milliseconds, of the request whose trace holds the leaf
// operation's first call (the driver measured it, Trace.AddedLatency); false when the operation has
// no call in the trace or its root is not a request.
func addedLatency(t *analyzer.Trace, leaf *analyzer.Operation) (float64, bool) {
	if len(leaf.Attempts) == 0 || len(leaf.Attempts[0].Calls) == 0 {
		return 0, false
	}
	i, ok := t.Lookup(leaf.Attempts[0].Calls[0])
	if !ok {
		return 0, false
	}
	ns, ok := t.AddedLatency(i)
	return math.Round(float64(ns)/1e3) / 1e3, ok
}

// mayFire is the cheap first look, so that most traces cost no allocation: a chain's layers are
// the depths (counted from the root) of the operations above its leaves, and a layer retried when
// one of its operations made more than one try. A chain can only have as many retrying layers as
// there are depths at which some leaf's ancestor (or the leaf) retried, so fewer such depths than
// needed means no finding. Chains deeper than 64 layers are left to the full count.
func mayFire(ops []*analyzer.Operation, need int) bool {
	if need <= 0 {
		return true
	}
	var depths uint64
	var tries analyzer.TryCounter
	for _, op := range ops {
		if !op.IsLeaf() || len(op.Attempts) == 0 {
			continue
		}
		depth := 0
		for p := op; p != nil; p = p.Parent {
			depth++
		}
		if depth > 64 {
			return true
		}
		d := depth - 1
		for p := op; p != nil; p = p.Parent {
			if tries.Tries(p) > 1 {
				depths |= 1 << d
			}
			d--
		}
		if bits.OnesCount64(depths) >= need {
			return true // enough already: the full count decides
		}
	}
	return false
}

// hole is what inferredLayers found of one layer: of its tries on the chain (every copy of it in
// the trace), how many were read from its callee's SERVER spans, and whose they were.
type hole struct {
	callee          string
	inferred, tries int
}

// anyInferred reports whether any try of ops was read from its callee's SERVER span: when none
// was (most traces), no chain has a layer for inferredLayers to find, and its walk up each chain's
// operations - as deep as the chain, for each chain reported - is not made.
func anyInferred(t *analyzer.Trace, ops []*analyzer.Operation) bool {
	for _, op := range ops {
		for i := range op.Attempts {
			if j, ok := t.Lookup(op.Attempts[i].SpanID); ok && t.Spans[j].Kind == spans.KindServer {
				return true
			}
		}
	}
	return false
}

// inferredLayers says, by layer (owner), which tries of the chain's layers the engine read from the
// callee's SERVER spans because the caller's own spans are missing (a service that exports
// nothing, attempt spans that never ended, a hop below the instrumentation): such a try's span is
// the callee's SERVER span, not a CLIENT one. Only the layers with such tries are in the map. It
// runs only for a chain being reported, and reads each operation on it once: a chain has as many
// operations as leaves under a loop as wide.
func inferredLayers(t *analyzer.Trace, c *analyzer.LeafChain) map[string]hole {
	var out map[string]hole
	var seen audit.Set[*analyzer.Operation]
	for _, leaf := range c.Leaves {
		for op := leaf; op != nil; op = op.Parent {
			if !seen.Add(op) {
				break // its ancestors were counted with it
			}
			h := hole{}
			for i := range op.Attempts {
				a := &op.Attempts[i]
				h.tries++
				if j, ok := t.Lookup(a.SpanID); ok && t.Spans[j].Kind == spans.KindServer {
					h.inferred++
					if h.callee == "" {
						h.callee = t.Spans[j].Service()
					}
				}
			}
			if out == nil {
				out = map[string]hole{}
			}
			prev := out[op.Owner]
			prev.tries += h.tries
			prev.inferred += h.inferred
			if prev.callee == "" {
				prev.callee = h.callee
			}
			out[op.Owner] = prev
		}
	}
	for k, h := range out {
		if h.inferred == 0 {
			delete(out, k)
		}
	}
	return out
}

// ownerAdvice names the layer that should own the retries: the policy's owner for the leaf
// operations' class when the file names one, else the layer nearest the dependency.
func ownerAdvice(classes *audit.Classes, c analyzer.LeafChain, layers []analyzer.Layer) string {
	if len(c.Leaves) > 0 {
		cls := classes.Of(c.Leaves[0])
		if audit.FromFile(cls.Owner) {
			return fmt.Sprintf("let %s own the retries, as the policy says (owner at %s), and make the other layers fail fast",
				cls.Owner.Value, cls.Owner.Pos.FileLine())
		}
	}
	return fmt.Sprintf("let one layer own retries (%s is nearest the dependency) and make the others fail fast, or share one retry budget across the layers",
		layers[len(layers)-1].Service)
}
