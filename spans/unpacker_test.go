package spans_test

import (
	"errors"
	"reflect"
	"testing"
	"unsafe"

	"github.com/stormwatch/stormwatch/analyzer/workload"
	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/spans/spanstest"
)

// unpackerTraces are traces of every shape the fixtures and the workload have, with every
// attribute kept.
func unpackerTraces(t *testing.T) [][]spans.Span {
	t.Helper()
	var out [][]spans.Span
	for _, f := range spanstest.FixtureTraces(t, spans.DecodeOptions{AllAttributes: true}) {
		out = append(out, f.Traces...)
	}
	w := workload.NewWorkload(1_700_000_000_000_000_000)
	batch := &spans.Batch{}
	w.Fill(batch, 50)
	return append(out, batch.Spans)
}

// TestUnpackerMatchesAppendUnpacked: an Unpacker reused from trace to trace (Reset between them)
// gives exactly the spans AppendUnpacked gives, whatever the trace before it left in its
// buffers, and the strings alias the packed bytes instead of a copy.
func TestUnpackerMatchesAppendUnpacked(t *testing.T) {
	var u spans.Unpacker
	var dst []spans.Span
	traces := unpackerTraces(t)
	// Both directions, so that big traces come before small ones and after them.
	for pass := range 2 {
		for k := range traces {
			ss := traces[k]
			if pass == 1 {
				ss = traces[len(traces)-1-k]
			}
			b := spans.AppendPacked(nil, ss)
			want, err := spans.UnpackSpans(b)
			if err != nil {
				t.Fatal(err)
			}
			u.Reset()
			got, err := u.Append(dst[:0], b)
			if err != nil {
				t.Fatalf("Unpacker.Append: %v", err)
			}
			dst = got
			if len(want) == 0 && len(got) == 0 {
				continue
			}
			if !reflect.DeepEqual(want, got) {
				t.Fatalf("trace %d: Unpacker differs from AppendUnpacked:\n%s", k,
					spanstest.Diff(&spans.Batch{Spans: want}, &spans.Batch{Spans: got}))
			}
			for i := range got {
				if s := got[i].Name; s != "" && !within(s, b) {
					t.Fatalf("span %d's name %q does not alias the packed bytes", i, s)
				}
			}
		}
	}
}

// within reports whether s's bytes are inside b.
func within(s string, b []byte) bool {
	p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
	base := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return p >= base && p+uintptr(len(s)) <= base+uintptr(len(b))
}

// TestUnpackerAppendsSeveralTraces: traces appended one after another without a Reset are all
// intact together (growing a buffer must not move or overwrite the spans appended before).
func TestUnpackerAppendsSeveralTraces(t *testing.T) {
	traces := unpackerTraces(t)
	var u spans.Unpacker
	var got, want []spans.Span
	for _, ss := range traces {
		b := spans.AppendPacked(nil, ss)
		var err error
		if got, err = u.Append(got, b); err != nil {
			t.Fatal(err)
		}
		if want, err = spans.AppendUnpacked(want, b); err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("appended traces differ:\n%s", spanstest.Diff(&spans.Batch{Spans: want}, &spans.Batch{Spans: got}))
	}
}

// TestUnpackerDoesNotAllocate: once its buffers have grown, unpacking a trace allocates nothing.
func TestUnpackerDoesNotAllocate(t *testing.T) {
	w := workload.NewWorkload(1_700_000_000_000_000_000)
	batch := &spans.Batch{}
	w.Fill(batch, 200)
	b := spans.AppendPacked(nil, batch.Spans)
	var u spans.Unpacker
	dst := make([]spans.Span, 0, len(batch.Spans))
	allocs := testing.AllocsPerRun(20, func() {
		u.Reset()
		if _, err := u.Append(dst[:0], b); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations to unpack %d spans again, want 0", allocs, len(batch.Spans))
	}
}

// TestUnpackerRejectsCorruptInput: the Unpacker refuses what AppendUnpacked refuses, with
// ErrPackCorrupt, and leaves dst as it was.
func TestUnpackerRejectsCorruptInput(t *testing.T) {
	good := spans.AppendPacked(nil, unpackerTraces(t)[0])
	var u spans.Unpacker
	for n := range len(good) {
		got, err := u.Append([]spans.Span{{Name: "kept"}}, good[:n])
		if !errors.Is(err, spans.ErrPackCorrupt) {
			t.Fatalf("truncated to %d bytes: err = %v, want ErrPackCorrupt", n, err)
		}
		if len(got) != 1 || got[0].Name != "kept" {
			t.Fatalf("truncated to %d bytes: dst changed on error", n)
		}
	}
}
