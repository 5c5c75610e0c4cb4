package engine

import (
	"hash/maphash"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stormwatch/stormwatch/analyzer"
)

// TestIntentKeyHashesItsThreeNumbers pins intentKey to the hash of the parent's intent, the
// occurrence and the key as 24 little-endian bytes, the layout it has always hashed.
func TestIntentKeyHashesItsThreeNumbers(t *testing.T) {
	seed := maphash.MakeSeed()
	rng := rand.New(rand.NewPCG(7, 8))
	for range 1000 {
		parent := &analyzer.Operation{}
		setIntentKey(parent, rng.Uint64())
		key, occ := rng.Uint64(), rng.IntN(1000)
		var buf [24]byte
		for i := range 8 {
			buf[i] = byte(parent.IntentKey() >> (8 * i))
			buf[8+i] = byte(uint64(occ) >> (8 * i))
			buf[16+i] = byte(key >> (8 * i))
		}
		if got, want := intentKey(seed, parent, key, occ), maphash.Bytes(seed, buf[:]); got != want {
			t.Fatalf("intentKey = %x, want %x", got, want)
		}
	}
}

// TestURLCutsMatchIndexAny checks the URL cutters against strings.IndexAny (and hostOfAuthority
// against cutting at the last '@'): on real URLs, and on every string of up to five of the
// characters they cut at and one they do not, so that every order of the cuts is tried.
func TestURLCutsMatchIndexAny(t *testing.T) {
	cases := []string{"http://api:8080/items/1?request_id=1", "https://user:pw@api/items/1#f"}
	var all func(prefix string)
	all = func(prefix string) {
		cases = append(cases, prefix)
		if len(prefix) < 5 {
			for _, c := range "a/?#@" {
				all(prefix + string(c))
			}
		}
	}
	all("")
	for _, s := range cases {
		if got, want := indexEndOfAuthority(s), strings.IndexAny(s, "/?#"); got != want {
			t.Errorf("indexEndOfAuthority(%q) = %d, want %d", s, got, want)
		}
		if got, want := indexEndOfPath(s), strings.IndexAny(s, "?#"); got != want {
			t.Errorf("indexEndOfPath(%q) = %d, want %d", s, got, want)
		}
		if got, want := hostOfAuthority(s), s[strings.LastIndexByte(s, '@')+1:]; got != want {
			t.Errorf("hostOfAuthority(%q) = %q, want %q", s, got, want)
		}
	}
}
