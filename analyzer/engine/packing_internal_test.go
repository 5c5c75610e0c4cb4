package engine

import (
	"reflect"
	"testing"

	"github.com/stormwatch/stormwatch/spans"
)

// A batch of span values is packed in the analyzer's own memory, kept for the next such batch:
// after a huge one it must be let go at once, since a collector whose producers pack their own
// batches may never send another to trim it.
func TestAHugeBatchOfSpanValuesLeavesNoPackingMemory(t *testing.T) {
	batch := func(traces, perTrace int) *spans.Batch {
		b := &spans.Batch{}
		for i := range traces {
			for j := range perTrace {
				s := spans.Span{Name: "GET /items", Kind: spans.KindClient, StartUnixNano: 1e18, EndUnixNano: 1e18 + 1e6}
				s.TraceID[0], s.TraceID[1], s.TraceID[2] = 1, byte(i>>8), byte(i)
				s.SpanID[0], s.SpanID[1], s.SpanID[2] = byte(j>>8), byte(j), 1
				b.Spans = append(b.Spans, s)
			}
		}
		return b
	}
	a := New(Config{MaxSpans: 1000, WindowInterval: -1})
	if err := a.ConsumeBatch(t.Context(), batch(2, 10)); err != nil {
		t.Fatal(err)
	}
	if reflect.ValueOf(a.packing).IsZero() {
		t.Fatal("a small batch's packing memory was dropped: nothing is kept from batch to batch")
	}
	if err := a.ConsumeBatch(t.Context(), batch(200, 1000)); err != nil {
		t.Fatal(err)
	}
	if !reflect.ValueOf(a.packing).IsZero() {
		t.Error("200,000 spans' packing memory is kept after the batch was filed")
	}
}
