package analyzer

import (
	"math/rand/v2"
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
// chain, and must count three, as LeafChains measures, and list them as LeafChains' layers do.
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
	for _, half := range []int{1, 2} {
		want := []LeafChain{ends(all[0], half)}
		if got := RetryingChains(ops, 3, half); !reflect.DeepEqual(got, want) {
			t.Errorf("RetryingChains(need 3, half %d) = %+v, want %+v", half, got, want)
		}
	}
	if got := RetryingChains(ops, 4, 2); len(got) != 0 {
		t.Errorf("RetryingChains(need 4) = %+v, want none", got)
	}
}

// A chain's count and ends are read from its leaves' common ancestor's path and the layers below
// it, not from every layer: on random trees of copies - one root or several, leaves of one intent
// at different depths, copies that part high or low, retries anywhere - RetryingChains says what
// LeafChains' full measure says, for every need and every half, the comb's deep chains (more
// retrying layers than twice the half) among them.
func TestRetryingChainsListTheEndsOfLeafChains(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	owners := []string{"edge", "api", "mid", "low", "leaf"}
	deep := 0
	for range 400 {
		var ops []*Operation
		var grow func(parent *Operation, intent uint64, depth int)
		grow = func(parent *Operation, intent uint64, depth int) {
			tries := 1 + rng.IntN(3)*rng.IntN(2)
			op := chainOp(owners[rng.IntN(len(owners))], parent, intent, tries)
			ops = append(ops, op)
			if depth == 0 {
				return
			}
			// Children of a few intents, an intent's copies under several tries or parents, and
			// at several depths (the intents wrap around).
			for range rng.IntN(3) + depth%2 {
				grow(op, (intent*3+uint64(rng.IntN(2)))%23, depth-1-rng.IntN(2))
			}
		}
		for range 1 + rng.IntN(2) {
			grow(nil, 1, rng.IntN(12))
		}
		// A comb under the last operation and its copies under others, some as deep as the
		// first, some shallower: a call each level, retried or not, and a leaf of its own, of its
		// own dependency (more than the 16 reported dependencies compared one by one).
		levels, under := rng.IntN(40), []*Operation{ops[len(ops)-1]}
		for range rng.IntN(3) {
			under = append(under, ops[rng.IntN(len(ops))])
		}
		for c, p := range under {
			n := levels
			if c > 0 && rng.IntN(2) == 0 {
				n = rng.IntN(levels + 1)
			}
			for i := range n {
				leaf := chainOp("leaf", p, 1000+uint64(i), 1+rng.IntN(2))
				leaf.Dependency += strconv.Itoa(i % 20)
				ops = append(ops, leaf)
				p = chainOp(owners[rng.IntN(len(owners))], p, 2000+uint64(i), 1+rng.IntN(3)/2)
				ops = append(ops, p)
			}
		}
		all := LeafChains(ops)
		for need := 1; need <= 4; need++ {
			for _, half := range []int{1, 2, 3, 32} {
				var want []LeafChain
				seen := map[string]bool{}
				for _, c := range all {
					if !seen[c.Dependency] && len(c.RetryingLayers()) >= need {
						seen[c.Dependency] = true
						want = append(want, ends(c, half))
						if len(c.RetryingLayers()) > 2*half {
							deep++
						}
					}
				}
				if got := RetryingChains(ops, need, half); len(got) != len(want) || len(got) > 0 && !reflect.DeepEqual(got, want) {
					t.Fatalf("need %d, half %d: RetryingChains %+v, want %+v", need, half, got, want)
				}
			}
		}
	}
	if deep < 100 {
		t.Errorf("only %d chains had more retrying layers than twice the half: the ends were hardly compared", deep)
	}
}

// ends is c, a chain of LeafChains, as RetryingChains(..., half) gives it: its retrying layers
// counted, their first half and last half listed (all, when at most twice half), no layers.
func ends(c LeafChain, half int) LeafChain {
	all := c.RetryingLayers()
	c.Layers, c.Retrying, c.Ends = nil, len(all), all
	if len(all) > 2*half {
		c.Ends = slices.Concat(all[:half], all[len(all)-half:])
	}
	return c
}
