package spans

import (
	"testing"
	"unsafe"
)

func TestAttrSlabGrowsCompactsAndRollsBack(t *testing.T) {
	var a attrSlab
	a.init(8) // span 2 fits and is rolled back; span 4 makes the slab move
	res := &Resource{}
	a.begin()
	a.add(StringAttr("r", "1"))
	res.Attrs = a.end()
	var spans []Span
	for i := 0; i < 5; i++ {
		a.begin()
		m := a.mark()
		for j := 0; j <= i; j++ {
			a.add(IntAttr("k", int64(10*i+j)))
		}
		if i == 2 { // a rejected span gives its space back when the slab has not moved
			a.rollback(m)
			continue
		}
		spans = append(spans, Span{Resource: res, Attrs: a.end()})
	}
	if a.used != 1+1+2+4+5 {
		t.Fatalf("used = %d", a.used)
	}
	// Lots of slack: pretend the estimate was huge.
	a.allocated += 1000
	a.compact(spans)
	if a.allocated != a.used || cap(a.buf) != a.used {
		t.Fatalf("after compact: allocated %d, used %d, cap %d", a.allocated, a.used, cap(a.buf))
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(a.buf)))
	end := base + uintptr(cap(a.buf))*unsafe.Sizeof(Attr{})
	for i, s := range append([]Span{{Attrs: res.Attrs}}, spans...) {
		p := uintptr(unsafe.Pointer(unsafe.SliceData(s.Attrs)))
		if p < base || p >= end || cap(s.Attrs) != len(s.Attrs) {
			t.Errorf("run %d not in the compacted array or not capped", i)
		}
	}
	want := [][]int64{{0}, {10, 11}, {30, 31, 32, 33}, {40, 41, 42, 43, 44}}
	for i, s := range spans {
		if len(s.Attrs) != len(want[i]) {
			t.Fatalf("span %d: %v", i, s.Attrs)
		}
		for j, x := range want[i] {
			if s.Attrs[j].Num != x {
				t.Errorf("span %d attr %d = %d, want %d", i, j, s.Attrs[j].Num, x)
			}
		}
	}
	if res.Attrs[0].Str != "1" {
		t.Errorf("resource attrs lost: %v", res.Attrs)
	}
}
