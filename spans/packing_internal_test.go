package spans

import (
	"strconv"
	"strings"
	"testing"
)

// A Packing keeps its memory from batch to batch, but not a huge batch's: Trim lets it go as soon
// as its consumer is done, and a batch within the bound keeps it.
func TestPackingTrimDropsOnlyAHugeBatchsMemory(t *testing.T) {
	// Each span's value its own string: the packer writes a string it has already written once.
	batch := func(n int, value string) []Span {
		ss := make([]Span, n)
		for i := range ss {
			ss[i].TraceID[0], ss[i].TraceID[1] = 1, byte(i%7)
			ss[i].SpanID[0], ss[i].SpanID[1], ss[i].SpanID[2] = 1, byte(i>>8), byte(i)
			ss[i].Attrs = []Attr{StringAttr("payload", strconv.Itoa(i)+value)}
		}
		return ss
	}
	var p Packing
	p.Pack(batch(100, "small"))
	p.Trim()
	if cap(p.bp.buf) == 0 {
		t.Fatal("a small batch's packing memory was dropped: nothing is kept from batch to batch")
	}
	// 5,000 spans of 1 KiB each: past maxPackerKeep's 4 MiB of packed bytes.
	p.Pack(batch(5_000, strings.Repeat("x", 1<<10)))
	if cap(p.bp.buf) <= maxPackerKeep {
		t.Fatalf("the huge batch packed into %d bytes, not past the bound: the test proves nothing", cap(p.bp.buf))
	}
	p.Trim()
	if cap(p.bp.buf) != 0 || p.bp.slot != nil {
		t.Errorf("after Trim the packing still holds %d bytes and a map of %d traces", cap(p.bp.buf), len(p.bp.slot))
	}
}
