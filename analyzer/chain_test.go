package analyzer

import (
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/stormwatch/stormwatch/spans"
)

// chainOp is an operation owned by owner under parent, of intent, with tries attempts of one call each;
// parent's child count goes up by one.
func chainOp(owner string, parent *Operation, intent uint64, tries int) *Operation {
	o := &Operation{Owner: owner, Dependency: owner + "-dep", Parent: parent, Attempts: make([]Attempt, tries)}
	for i := range o.Attempts {
		o.Attempts[i].Calls = make([]spans.SpanID, 1)
	}
	o.built.Intent = intent
	if parent != nil {
		parent.built.Children++
	}
	return o
}

// Two copies of one leaf whose paths retried at different depths besides a common one: each copy
// has two retrying layers above it, the chain three (its layers are its copies' merged, depth by
// depth). RetryingChains counts them from the copies' retrying ancestors, not by measuring the
// chain, and must count three, as LeafChains measures.
func TestRetryingChainsMergeTheCopiesRetryingDepths(t *testing.T) {
	r := chainOp("edge", nil, 1, 1)
	x := chainOp("api", r, 2, 2)
	y1 := chainOp("mid", x, 3, 2)
	y2 := chainOp("mid", x, 3, 1)
	w2 := chainOp("low", y2, 4, 2)
	l1 := chainOp("leaf", y1, 5, 1)
	l2 := chainOp("leaf", w2, 5, 1)
	ops := []*Operation{r, x, y1, y2, w2, l1, l2}

	all := LeafChains(ops)
	if len(all) != 1 || len(all[0].RetryingLayers()) != 3 {
		t.Fatalf("LeafChains: %+v, want one chain of three retrying layers", all)
	}
	if got := RetryingChains(ops, 3); !reflect.DeepEqual(got, all) {
		t.Errorf("RetryingChains(need 3) = %+v, want %+v", got, all)
	}
	if got := RetryingChains(ops, 4); len(got) != 0 {
		t.Errorf("RetryingChains(need 4) = %+v, want none", got)
	}
}

// EndsOfRetryingLayers are RetryingLayers when there are at most twice half, else their first
// half and last half, in order; and it counts them all. Layers that did not retry are skipped
// wherever they fall.
func TestEndsOfRetryingLayersAreRetryingLayersEnds(t *testing.T) {
	for n := range 30 {
		var c LeafChain
		for i := range n {
			c.Layers = append(c.Layers, Layer{Service: "s" + strconv.Itoa(i), Attempts: 1 + i%3})
		}
		all := c.RetryingLayers()
		for _, half := range []int{1, 2, 3, 5} {
			want := all
			if len(all) > 2*half {
				want = slices.Concat(all[:half], all[len(all)-half:])
			}
			got, count := c.EndsOfRetryingLayers(half)
			if count != len(all) || !slices.Equal(got, want) {
				t.Errorf("%d layers, half %d: %v (%d), want %v (%d)", n, half, got, count, want, len(all))
			}
		}
	}
}
