package retryamplification

import (
	"strconv"

	"github.com/stormwatch/stormwatch/analyzer"
)

// MayFire exposes the first look to the external tests.
var MayFire = mayFire

// InferredLayers is inferredLayers for the external tests, each layer's answer as text: "" for a
// layer none of whose owner's tries was inferred, else "callee inferred/tries".
func InferredLayers(t *analyzer.Trace, ops []*analyzer.Operation, chains []analyzer.LeafChain) [][]string {
	holes := inferredLayers(t, ops, chains)
	out := make([][]string, len(holes))
	for k, hs := range holes {
		out[k] = make([]string, len(hs))
		for i, h := range hs {
			if h.inferred > 0 {
				out[k][i] = h.callee + " " + strconv.Itoa(h.inferred) + "/" + strconv.Itoa(h.tries)
			}
		}
	}
	return out
}
