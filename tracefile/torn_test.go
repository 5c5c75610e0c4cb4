package tracefile

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// session is what one session of a recorder leaves in a gzip recording: the requests from..to-1,
// closed (a whole member) or killed after a flush in the middle of its last request (torn).
func session(t *testing.T, name string, from, to int, torn bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	format, _ := FormatFromPath(name)
	w := newWriter(&buf, format, true)
	for i := from; i < to; i++ {
		if torn && i == to-1 {
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			whole := buf.Len()
			if err := w.WriteRequest(mustMarshal(t, fullRequest(i)), false); err != nil {
				t.Fatal(err)
			}
			w.Flush()
			return buf.Bytes()[:whole+(buf.Len()-whole)/2]
		}
		if err := w.WriteRequest(mustMarshal(t, fullRequest(i)), false); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// A gzip recording whose second session was killed mid-write and a third appended after it: every
// whole record of every member is read, the cut one is skipped, and the tear is noted with where
// it is. Read as one gzip stream, the third member's bytes were taken for the torn one's and the
// file failed with "flate: corrupt input".
func TestTornGzipMemberInTheMiddle(t *testing.T) {
	for _, name := range []string{"r.jsonl.gz", "r.pb.gz"} {
		t.Run(name, func(t *testing.T) {
			var file []byte
			file = append(file, session(t, name, 0, 2, false)...)
			tornAt := len(file)
			file = append(file, session(t, name, 2, 4, true)...)
			file = append(file, session(t, name, 4, 6, true)...) // torn again, then a whole one
			file = append(file, session(t, name, 6, 7, false)...)
			path := filepath.Join(t.TempDir(), name)
			if err := os.WriteFile(path, file, 0o644); err != nil {
				t.Fatal(err)
			}
			var warned []error
			r, err := Open(path, ReadOptions{OnWarning: func(err error) { warned = append(warned, err) }})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			recs := readAll(t, r)
			// Requests 0, 1, 2, 4, 6 are whole; 3 and 5 were cut.
			if len(recs) != 5 {
				t.Fatalf("%d records, want the 5 whole ones; warnings: %v", len(recs), warned)
			}
			for k, want := range []int{0, 1, 2, 4, 6} {
				exp := fullRequest(want).ResourceSpans[0].ScopeSpans[0].Spans[0].SpanId
				if got := recs[k].Batch.Spans[0].SpanID; !bytes.Equal(got[:], exp) {
					t.Errorf("record %d is not request %d", k, want)
				}
			}
			if r.Skipped() != 2 {
				t.Errorf("skipped %d records, want the 2 cut ones", r.Skipped())
			}
			text := ""
			for _, w := range warned {
				text += w.Error() + "\n"
			}
			if !strings.Contains(text, "gzip member at byte "+strconv.Itoa(tornAt)+" is torn") {
				t.Errorf("no warning names the torn member at byte %d:\n%s", tornAt, text)
			}
			if tears := r.Tears(); len(tears) != 2 || !strings.Contains(tears[0], "at byte "+strconv.Itoa(tornAt)) {
				t.Errorf("tears = %q, want the 2 torn members, the first at byte %d", tears, tornAt)
			}
		})
	}
}

// A recording whose recorder was killed in the middle of a record, appended to again: Append cuts
// the torn tail back to the last whole record (keeping every whole one, and saying what it did),
// so the next session's records follow whole ones and the file reads strictly, without a warning.
// Appending after the cut record left it in the middle of the file, where a strict reader stops
// and, for .gz, a gzip reader fails.
func TestAppendCutsATornTail(t *testing.T) {
	for _, name := range []string{"r.jsonl", "r.pb", "r.jsonl.gz", "r.pb.gz"} {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			format, gz := FormatFromPath(name)
			w := newWriter(&buf, format, gz)
			for i := range 3 {
				if err := w.WriteRequest(mustMarshal(t, fullRequest(i)), false); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			whole := buf.Len()
			if err := w.WriteRequest(mustMarshal(t, fullRequest(3)), false); err != nil {
				t.Fatal(err)
			}
			w.Flush()
			path := filepath.Join(t.TempDir(), name)
			if err := os.WriteFile(path, buf.Bytes()[:whole+(buf.Len()-whole)/2], 0o644); err != nil {
				t.Fatal(err)
			}
			a, err := Append(path)
			if err != nil {
				t.Fatal(err)
			}
			rc := a.Recovery()
			if !rc.Torn || !gz && rc.CutBytes == 0 { // a gzip cut may give no byte of the cut record
				t.Fatalf("recovery = %+v, want a torn tail cut", rc)
			}
			if gz && rc.Kept != 3 {
				t.Errorf("kept %d records of the torn gzip member, want 3", rc.Kept)
			}
			if !strings.Contains(rc.String(), "cut back to its last whole record") {
				t.Errorf("the recovery says %q", rc)
			}
			if err := a.WriteRequest(mustMarshal(t, fullRequest(4)), false); err != nil {
				t.Fatal(err)
			}
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			var warned []error
			r, err := Open(path, ReadOptions{Strict: true, OnWarning: func(err error) { warned = append(warned, err) }})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if recs := readAll(t, r); len(recs) != 4 || len(warned) != 0 {
				t.Fatalf("%d records and warnings %v, want the 3 whole ones and the new one, no warning", len(recs), warned)
			}
			// Again: a whole file is left as it is.
			a, err = Append(path)
			if err != nil {
				t.Fatal(err)
			}
			if rc := a.Recovery(); rc.Torn {
				t.Errorf("a whole recording was cut: %+v", rc)
			}
			a.Close()
		})
	}
}

// A file that is not a gzip recording is not appended to as one.
func TestAppendRefusesAGzipNameOverOtherContent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.jsonl.gz")
	if err := os.WriteFile(path, []byte("{\"resourceSpans\":[]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Append(path); err == nil || !strings.Contains(err.Error(), "does not hold a gzip recording") {
		t.Fatalf("Append = %v, want a refusal", err)
	}
}

// What is not a regular file is refused when opened, before anything is read: a device never ends
// (reading /dev/zero as JSON lines went on forever), a named pipe may not, a directory is no file.
func TestOpenRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.jsonl")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{"/dev/zero": "a character device", dir: "a directory", fifo: "a named pipe"} {
		done := make(chan error, 1)
		go func() {
			r, err := Open(path, ReadOptions{})
			if err == nil {
				_, err = r.Next()
				r.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("%s: %v, want it refused as %s", path, err, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: still reading after 10 s", path)
		}
	}
	zero, err := os.Open("/dev/zero")
	if err != nil {
		t.Fatal(err)
	}
	defer zero.Close()
	if _, err := Open("-", ReadOptions{Stdin: zero}); err == nil || !strings.Contains(err.Error(), "standard input is a character device") {
		t.Errorf("/dev/zero as standard input: %v", err)
	}
}

// A .jsonl recording whose last record lost only its newline to the crash: the reader reads the
// record, so Append ends it instead of cutting it.
func TestAppendEndsALastLineWithoutItsNewline(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.jsonl")
	var buf bytes.Buffer
	w := NewWriter(&buf, FormatJSONLines)
	for i := range 2 {
		if err := w.WriteRequest(mustMarshal(t, fullRequest(i)), false); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	if err := os.WriteFile(path, bytes.TrimSuffix(buf.Bytes(), []byte("\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := Append(path)
	if err != nil {
		t.Fatal(err)
	}
	if rc := a.Recovery(); !rc.Torn || rc.CutBytes != 0 || !strings.Contains(rc.String(), "newline was added") {
		t.Errorf("recovery = %+v (%s)", rc, rc)
	}
	a.WriteRequest(mustMarshal(t, fullRequest(2)), false)
	a.Close()
	r, err := Open(path, ReadOptions{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if recs := readAll(t, r); len(recs) != 3 || r.Skipped() != 0 {
		t.Errorf("%d records, %d skipped, want 3 and none", len(recs), r.Skipped())
	}
}
