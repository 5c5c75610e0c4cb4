package collector

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/tracefile"
)

// countingWriter is the real trace file writer, counting its syncs.
type countingWriter struct {
	*tracefile.Writer
	syncs   atomic.Int64
	failing bool
}

func (w *countingWriter) Sync() error {
	w.syncs.Add(1)
	if w.failing {
		return errors.New("disk full")
	}
	return w.Writer.Sync()
}

// recording reads the recording as it is on disk now (the collector may still write it): how
// many records it holds, and its spans' names in order.
func recording(t *testing.T, path string) (records int, names []string) {
	t.Helper()
	r, err := tracefile.Open(path, tracefile.ReadOptions{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return records, names
		}
		if err != nil {
			t.Fatalf("reading the recording back: %v", err)
		}
		records++
		for _, sp := range rec.Batch.Spans {
			names = append(names, sp.Name)
		}
	}
}

// recordedSpans is how many spans the recording holds now.
func recordedSpans(t *testing.T, path string) int {
	t.Helper()
	_, names := recording(t, path)
	return len(names)
}

// newRecording is a recording of the given format (a file extension) in a test's directory, and
// its path, for a collector's WithRecorder and for recording to read back.
func newRecording(t *testing.T, format string) (*tracefile.Writer, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rec."+format)
	w, err := tracefile.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	return w, path
}

func recordingCollector(t *testing.T, sync bool, format string) (*Collector, *countingWriter, string) {
	t.Helper()
	w, path := newRecording(t, format)
	rec := &countingWriter{Writer: w}
	// The interval flush never comes during the test: only the sync can put spans in the file.
	c := start(t, Config{RecordSync: sync, RecordFlushInterval: time.Hour}, &sink{}, WithRecorder(rec))
	return c, rec, path
}

// With RecordSync, a request's spans are in the file, fsync'd, the moment its answer arrives - read
// back while the collector still holds the file open. Without it they are not (yet): the control
// that shows the check can tell.
func TestRecordSyncAcknowledgesOnlyWhatIsOnDisk(t *testing.T) {
	for _, ek := range []exporterKind{grpcSDKExporter(false), httpSDKExporter(true)} {
		for _, format := range []string{"jsonl", "pb.gz"} {
			t.Run(ek.name+"/"+format, func(t *testing.T) {
				c, rec, path := recordingCollector(t, true, format)
				exp, err := ek.make(context.Background(), c, nil, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer exp.Shutdown(context.Background())
				for i := range 5 {
					if err := exp.ExportSpans(context.Background(), stubs(10*i, 10)); err != nil {
						t.Fatal(err)
					}
					if got := recordedSpans(t, path); got != 10*(i+1) {
						t.Fatalf("after %d acknowledged exports the file holds %d spans, want %d", i+1, got, 10*(i+1))
					}
					if s := rec.syncs.Load(); s < int64(i+1) {
						t.Fatalf("%d acknowledged exports, %d fsyncs", i+1, s)
					}
				}
			})
		}
	}
	t.Run("control without sync", func(t *testing.T) {
		c, rec, path := recordingCollector(t, false, "jsonl")
		exp, err := grpcSDKExporter(false).make(context.Background(), c, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer exp.Shutdown(context.Background())
		if err := exp.ExportSpans(context.Background(), stubs(0, 10)); err != nil {
			t.Fatal(err)
		}
		if got := recordedSpans(t, path); got != 0 || rec.syncs.Load() != 0 {
			t.Fatalf("without sync the acknowledged spans are already in the file (%d spans, %d fsyncs): the test cannot tell", got, rec.syncs.Load())
		}
	})
}

// Concurrent requests share fsyncs, and every one of them is on disk when it is answered.
func TestRecordSyncGroupsConcurrentRequests(t *testing.T) {
	c, rec, path := recordingCollector(t, true, "pb")
	const clients, each = 8, 10
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := 0
	for g := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			exp, err := grpcSDKExporter(false).make(context.Background(), c, nil, nil)
			if err != nil {
				t.Error(err)
				return
			}
			defer exp.Shutdown(context.Background())
			for i := range each {
				if err := exp.ExportSpans(context.Background(), stubs(1000*g+10*i, 10)); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				acked += 10
				// Everything acknowledged so far, by any client, is in the file.
				if got := recordedSpans(t, path); got < acked {
					t.Errorf("%d spans acknowledged, %d in the file", acked, got)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if s := rec.syncs.Load(); s == 0 || s > clients*each {
		t.Fatalf("%d fsyncs for %d requests", s, clients*each)
	}
	t.Logf("%d requests, %d fsyncs", clients*each, rec.syncs.Load())
}

// A recording that cannot be made durable is not acknowledged: the client hears why.
func TestRecordSyncFailureIsNotAcknowledged(t *testing.T) {
	for _, ek := range []exporterKind{grpcSDKExporter(false), httpSDKExporter(false)} {
		t.Run(ek.name, func(t *testing.T) {
			c, rec, _ := recordingCollector(t, true, "jsonl")
			rec.failing = true
			exp, err := ek.make(context.Background(), c, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer exp.Shutdown(context.Background())
			err = exp.ExportSpans(context.Background(), stubs(0, 3))
			if err == nil || !strings.Contains(err.Error(), "disk full") {
				t.Fatalf("export answered %v, want the sync's failure", err)
			}
		})
	}
}

func TestRecordSyncNeedsASyncingRecorder(t *testing.T) {
	if _, err := New(Config{RecordSync: true}, &sink{}); err == nil {
		t.Error("record sync without a recorder was accepted")
	}
	if _, err := New(Config{RecordSync: true}, &sink{}, WithRecorder(&fakeRecorder{})); err == nil || !strings.Contains(err.Error(), "cannot sync") {
		t.Errorf("record sync with a recorder that cannot sync: %v", err)
	}
}
