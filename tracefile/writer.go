package tracefile

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sync"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
)

// ErrClosed is returned by a Writer used after Close.
var ErrClosed = errors.New("trace file writer is closed")

// Writer appends export requests to a trace file. It is safe for concurrent use: the collector's
// receivers record from many goroutines.
//
// Every record is assembled in memory and handed to the file in one piece, flushing what was
// buffered before it when it would not fit, so the file only ever ends between records or - if the
// process dies inside a write - in the middle of the last one, which the reader reports as truncated
// and skips. The .json layout is the exception: it is one document, valid only after Close.
type Writer struct {
	mu     sync.Mutex
	format Format
	name   string
	file   io.Closer     // the file Create opened; nil for NewWriter
	bw     *bufio.Writer // buffers writes to the file (or to gzip's output)
	gz     *gzip.Writer  // between the records and bw when compressing
	out    io.Writer     // where records go: gz or bw
	rec    []byte        // the record being assembled, reused
	n      int           // records written
	// jsonHasItems says the .json document's array has an element, so the next one needs a comma.
	jsonHasItems bool
	err          error // sticky: after a failed write the file's tail is unknown
	closed       bool
	// sync makes what was handed to the file durable (the file's fsync); nil when the
	// destination cannot. dirSynced says the file's directory entry was made durable too.
	sync      func() error
	dirSynced bool
	recovery  Recovery // what Append did to the existing file's end
}

// Create creates (or truncates) the trace file at path, its format chosen by the extension:
// ".jsonl", ".json" or ".pb", optionally followed by ".gz".
func Create(path string) (*Writer, error) {
	return openWriter(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY)
}

// Append opens the trace file at path for appending, creating it if needed: a collector restarted
// with the same --record file keeps what it recorded before. For .gz files each session adds a gzip
// member, which readers decompress as one stream. A .json file cannot be appended to. An existing
// file that ends in the middle of a record (its recorder was killed mid-write) is first cut back
// to its last whole record, keeping every whole one (see Recovery).
func Append(path string) (*Writer, error) {
	f, _, err := writeFormat(path)
	if err != nil {
		return nil, err
	}
	if f == FormatJSON {
		return nil, fmt.Errorf("trace file %s: a .json file holds one request and cannot be appended to: use .jsonl", path)
	}
	_, gz, _ := writeFormat(path)
	rec, err := recoverTail(path, f, gz)
	if err != nil {
		return nil, err
	}
	w, err := openWriter(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY)
	if err != nil {
		return nil, err
	}
	w.recovery = rec
	return w, nil
}

// Recovery says what Append found at the end of the existing file and did about it (see
// Recovery); the zero value when the file was new, empty or ended with a whole record.
func (w *Writer) Recovery() Recovery { return w.recovery }

func openWriter(path string, flag int) (*Writer, error) {
	format, gz, err := writeFormat(path)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, flag, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open trace file for writing: %w", err)
	}
	w := newWriter(f, format, gz)
	w.file = f
	w.name = path
	w.sync = func() error {
		if err := f.Sync(); err != nil {
			return err
		}
		if !w.dirSynced {
			// A file this run created is only durable once its directory entry is: fsync the
			// directory once.
			if err := syncDir(filepath.Dir(path)); err != nil {
				return err
			}
			w.dirSynced = true
		}
		return nil
	}
	return w, nil
}

// NewWriter writes records in format to w, uncompressed. Close flushes but does not close w.
func NewWriter(w io.Writer, format Format) *Writer {
	return newWriter(w, format, false)
}

// NewGzipWriter is NewWriter with gzip compression.
func NewGzipWriter(w io.Writer, format Format) *Writer {
	return newWriter(w, format, true)
}

func newWriter(dst io.Writer, format Format, compress bool) *Writer {
	w := &Writer{format: format, name: "trace file"}
	if f, ok := dst.(interface{ Sync() error }); ok {
		w.sync = f.Sync
	}
	w.bw = bufio.NewWriterSize(dst, 256<<10)
	w.out = w.bw
	if compress {
		// BestSpeed: a recorder under load must not become the collector's bottleneck.
		w.gz, _ = gzip.NewWriterLevel(w.bw, gzip.BestSpeed)
		w.out = w.gz
	}
	if format == FormatUnknown {
		w.err = errors.New("trace file writer: no format given")
	}
	return w
}

// Format is the layout the writer writes.
func (w *Writer) Format() Format { return w.format }

// Records is the number of requests written so far.
func (w *Writer) Records() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// WriteRequest appends one export request as received: protobuf bytes (isJSON false) or an OTLP/JSON
// body (isJSON true). It is transcoded when the file's format is the other encoding; a body that
// cannot be decoded is not written and the error says so. The bytes are not retained.
func (w *Writer) WriteRequest(body []byte, isJSON bool) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		return err
	}
	rec, err := w.encode(w.rec[:0], body, isJSON)
	if err != nil {
		return fmt.Errorf("record request: %w", err)
	}
	w.rec = rec
	return w.writeRecord(rec)
}

// WriteProto appends a request held as the generated type (the SDK exporter and tests use it).
func (w *Writer) WriteProto(req *coltracepb.ExportTraceServiceRequest) error {
	body, err := marshalRequest(req)
	if err != nil {
		return fmt.Errorf("record request: %w", err)
	}
	return w.WriteRequest(body, false)
}

func (w *Writer) usable() error {
	if w.closed {
		return ErrClosed
	}
	return w.err
}

// encode builds one record in dst.
func (w *Writer) encode(dst, body []byte, isJSON bool) ([]byte, error) {
	switch w.format {
	case FormatProto:
		dst = append(dst, 0, 0, 0, 0)
		if isJSON {
			var err error
			if dst, err = appendJSONToProto(dst, body); err != nil {
				return nil, err
			}
		} else {
			dst = append(dst, body...)
		}
		return dst, putLength(dst)
	case FormatJSONLines:
		if isJSON {
			// The body is already OTLP/JSON: keep it as sent (full fidelity, no decode cost), only
			// made one line. Compact also rejects what is not JSON at all.
			var buf bytes.Buffer
			buf.Grow(len(body))
			if err := json.Compact(&buf, body); err != nil {
				return nil, fmt.Errorf("decode OTLP/JSON: %w", err)
			}
			dst = append(dst, buf.Bytes()...)
		} else {
			var err error
			if dst, err = appendProtoAsJSON(dst, body); err != nil {
				return nil, err
			}
		}
		return append(dst, '\n'), nil
	case FormatJSON:
		if isJSON {
			// protojson decides what is accepted here, as it does for a .json file read back.
			var err error
			if body, err = jsonToProtoSlow(body); err != nil {
				return nil, err
			}
		}
		return w.jsonDocPart(dst, body)
	}
	return nil, fmt.Errorf("unknown trace file format %d", w.format)
}

// jsonDocPart continues the single .json document: its opening the first time, then the resource
// spans of the protobuf request body as more elements of one array. Close writes the end.
func (w *Writer) jsonDocPart(dst, body []byte) ([]byte, error) {
	if w.n == 0 {
		dst = append(dst, `{"resourceSpans":[`...)
	}
	start := len(dst)
	if w.jsonHasItems {
		dst = append(dst, ',')
	}
	out, err := appendResourceSpansJSON(dst, body)
	switch {
	case err != nil:
		return nil, err
	case len(out) == len(dst): // no resource spans: nothing to separate either
		return dst[:start], nil
	}
	w.jsonHasItems = true
	return out, nil
}

func putLength(rec []byte) error {
	n := len(rec) - 4
	if uint64(n) > math.MaxUint32 {
		return fmt.Errorf("record request: %d bytes do not fit the 4-byte length prefix", n)
	}
	binary.BigEndian.PutUint32(rec, uint32(n))
	return nil
}

// writeRecord hands rec to the buffered file in one piece.
func (w *Writer) writeRecord(rec []byte) error {
	if w.gz == nil && len(rec) > w.bw.Available() && w.bw.Buffered() > 0 {
		// bufio would split rec across two writes; flush first so the record goes out whole.
		if err := w.bw.Flush(); err != nil {
			w.err = fmt.Errorf("write %s: %w", w.name, err)
			return w.err
		}
	}
	if _, err := w.out.Write(rec); err != nil {
		w.err = fmt.Errorf("write %s: %w", w.name, err)
		return w.err
	}
	w.n++
	return nil
}

// Flush pushes everything written so far to the file (for gzip, as a sync flush that a reader can
// decompress up to). The collector calls it on an interval.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		return err
	}
	return w.flush()
}

// Sync is Flush, then makes the file durable: fsync(2), so what was written survives a crash of
// the machine, not only of the process. A writer whose destination has no Sync method only
// flushes. The collector calls it before acknowledging a request with --record-sync.
func (w *Writer) Sync() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		return err
	}
	if err := w.flush(); err != nil {
		return err
	}
	if w.sync != nil {
		if err := w.sync(); err != nil {
			w.err = fmt.Errorf("sync %s: %w", w.name, err)
			return w.err
		}
	}
	return nil
}

// syncDir makes a directory's entries durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func (w *Writer) flush() error {
	if w.gz != nil {
		if err := w.gz.Flush(); err != nil {
			w.err = fmt.Errorf("flush %s: %w", w.name, err)
			return w.err
		}
	}
	if err := w.bw.Flush(); err != nil {
		w.err = fmt.Errorf("flush %s: %w", w.name, err)
		return w.err
	}
	return nil
}

// Close finishes the file (the end of a .json document, the gzip trailer), flushes and closes it.
// Closing twice is harmless.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	var errs []error
	if w.err == nil {
		if w.format == FormatJSON {
			end := "]}\n"
			if w.n == 0 {
				end = `{"resourceSpans":[]}` + "\n"
			}
			if _, err := io.WriteString(w.out, end); err != nil {
				errs = append(errs, fmt.Errorf("write %s: %w", w.name, err))
			}
		}
		if w.gz != nil {
			if err := w.gz.Close(); err != nil {
				errs = append(errs, fmt.Errorf("finish gzip stream of %s: %w", w.name, err))
			}
		}
		if err := w.bw.Flush(); err != nil {
			errs = append(errs, fmt.Errorf("flush %s: %w", w.name, err))
		}
	} else {
		errs = append(errs, w.err)
	}
	if w.file != nil {
		if err := w.file.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", w.name, err))
		}
	}
	return errors.Join(errs...)
}
