package tracefile

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync/atomic"

	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/spans/jsonlex"
)

// DefaultMaxRecordBytes bounds one record (a line, a .json document, a protobuf message): the most
// a reader holds in memory at once, whatever the size of the file. The collector refuses requests
// over 20 MiB by default, so its recordings stay well under it.
const DefaultMaxRecordBytes = 64 << 20

// maxKeptWarnings bounds what Warnings keeps, so a file of garbage cannot fill memory with them.
const maxKeptWarnings = 100

// ErrTruncated marks the last record of a file that ends in the middle of it - what a recorder
// killed mid-write leaves. The reader reports it as a warning and ignores the record.
var ErrTruncated = errors.New("record cut short at the end of the file (an interrupted recording?); ignored")

// errGzipCut is the truncation of a gzip stream cut between records: nothing decodable is lost,
// but the file was not closed properly.
var errGzipCut = fmt.Errorf("gzip stream ends without its trailer: %w", ErrTruncated)

// ErrTooLarge marks a record over ReadOptions.MaxRecordBytes.
var ErrTooLarge = errors.New("record too large")

// ReadOptions tunes a Reader. The zero value reads leniently: malformed records are skipped and
// reported as warnings.
type ReadOptions struct {
	// Strict makes Next return the first malformed record's error and stop there.
	Strict bool
	// Raw fills Record.Raw with the request as protobuf bytes (replay sends them). Off by default:
	// for JSON files it costs a transcoding that analyze does not need.
	Raw bool
	// MaxRecordBytes bounds one record; 0 means DefaultMaxRecordBytes.
	MaxRecordBytes int
	// Decode is passed to the span decoders (AllAttributes for the TUI's span detail).
	Decode spans.DecodeOptions
	// Format overrides detection by extension and content.
	Format Format
	// OnWarning, when set, is called for every skipped record (and a truncated tail) as it is found.
	OnWarning func(error)
	// Stdin is what the path "-" reads; nil means os.Stdin.
	Stdin io.Reader
}

// Position locates a record: the line it starts on for JSON, its ordinal and byte offset for
// protobuf.
type Position struct {
	File   string
	Line   int   // 1-based first line of a JSON record; 0 for protobuf
	Record int   // 1-based ordinal of the record in the file
	Offset int64 // byte offset of a protobuf record's length prefix (in the decompressed stream)
	// Trace is set for the formats read as one document (Jaeger and Zipkin JSON), whose records
	// are its traces: the trace id.
	Trace string
}

func (p Position) String() string {
	if p.Line > 0 {
		return p.File + ":" + strconv.Itoa(p.Line)
	}
	if p.Trace != "" {
		return fmt.Sprintf("%s: trace %d (%s)", p.File, p.Record, p.Trace)
	}
	return fmt.Sprintf("%s: record %d (byte %d)", p.File, p.Record, p.Offset)
}

// Record is one export request read from a file.
type Record struct {
	// Batch is the decoded request. Its strings may alias Raw or an internal buffer that the record
	// owns; nothing is reused by the reader after Next returns.
	Batch *spans.Batch
	// Raw is the request as protobuf bytes when ReadOptions.Raw is set. Do not modify it: Batch may
	// alias it.
	Raw []byte
	Pos Position
}

// RecordError is a problem with one record, located by its position: "traces.jsonl:17: decode
// OTLP/JSON: ...".
type RecordError struct {
	Pos Position
	Err error
}

func (e *RecordError) Error() string { return e.Pos.String() + ": " + e.Err.Error() }
func (e *RecordError) Unwrap() error { return e.Err }

// Reader reads the records of one trace file, streaming: it holds one record at a time, never the
// file.
type Reader struct {
	name   string
	opt    ReadOptions
	closer io.Closer // the file Open opened
	src    *bufio.Reader
	format Format
	mode   jsonMode
	line   int // lines consumed so far (JSON)
	// longLine is the length of the last line longer than src's buffer: the next such line gets
	// a slice of that size at once instead of growing one read at a time, since the lines of one
	// recording (an exporter's batches) are alike.
	longLine int
	off      int64 // bytes consumed so far (protobuf)
	n        int   // records seen, good or bad
	err      error // sticky: a strict stop, a read error, or io.EOF

	warnings []error
	skipped  int
	read     int // records returned

	// members reads a gzip file member by member (nil for other input); notedTorn is how many of
	// its torn members have been reported.
	members   *gzipMembers
	notedTorn int

	// pending holds the traces of a document read whole (Jaeger, Zipkin JSON) not yet returned.
	pending []*spans.Batch
	docRead bool
	// size is how many bytes the input holds when it can tell (a regular file, not compressed;
	// an in-memory reader), else 0: a document read whole is read into memory of that size at
	// once rather than grown, copied and cleared step by step (see readDocument).
	size int64

	// spare is the memory of a record its consumer released (spans.Batch.Release): the next
	// line of a JSON-lines file is read into its body and decoded into its batch, rather than
	// into memory allocated and cleared afresh (a recording's lines are hundreds of kilobytes).
	// The consumer may release from a goroutine of its own.
	spare atomic.Pointer[recordMemory]
}

// recordMemory is what a JSON line's record is made in: the line (which its strings alias) and
// the batch's arrays.
type recordMemory struct {
	body  []byte
	batch *spans.Batch
}

// jsonMode says how JSON records are delimited.
type jsonMode uint8

const (
	jsonAuto  jsonMode = iota // undecided: the first record tells
	jsonLines                 // one record per line
	jsonDocs                  // records are whole JSON values spanning lines (a pretty-printed .json)
)

// Open opens the trace file at path ("-" for standard input). The format comes from the extension
// when it has a known one, else from the content; gzip is recognised by its magic bytes.
func Open(path string, opt ReadOptions) (*Reader, error) {
	if path == "-" {
		in := opt.Stdin
		if in == nil {
			in = os.Stdin
		}
		if f, ok := in.(*os.File); ok {
			if st, err := f.Stat(); err == nil && st.Mode()&(os.ModeDevice|os.ModeCharDevice|os.ModeDir) != 0 {
				return nil, fmt.Errorf("standard input is %s, not a file or a pipe: pipe the trace file into it", fileKind(st.Mode()))
			}
		}
		return NewReader(in, "-", opt)
	}
	// A device never ends (/dev/zero), a named pipe may never (opening one waits for a writer),
	// a directory is no file: refused before it is opened. Standard input ("-") is the way to
	// stream.
	notRegular := func(st os.FileInfo) error {
		return fmt.Errorf("trace file %s is %s, not a regular file: give a file, or pipe the data into - (standard input)", path, fileKind(st.Mode()))
	}
	if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() {
		return nil, notRegular(st)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open trace file: %w", err)
	}
	if st, err := f.Stat(); err == nil && !st.Mode().IsRegular() {
		f.Close()
		return nil, notRegular(st) // replaced since it was looked at
	}
	r, err := NewReader(f, path, opt)
	if err != nil {
		f.Close()
		return nil, err
	}
	r.closer = f
	return r, nil
}

// NewReader reads a trace file's content from in; name is used for format detection by extension
// and in every message.
func NewReader(in io.Reader, name string, opt ReadOptions) (*Reader, error) {
	if opt.MaxRecordBytes <= 0 {
		opt.MaxRecordBytes = DefaultMaxRecordBytes
	}
	r := &Reader{name: name, opt: opt, src: bufio.NewReaderSize(in, 64<<10)}
	extFormat, _ := FormatFromPath(name)
	if magic, err := r.src.Peek(2); err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		if f, ok := in.(*os.File); ok && isRegular(f) {
			// A file: read member by member, so that a member torn by a crash costs only
			// its own last record (see gzipMembers).
			st, _ := f.Stat()
			r.members = &gzipMembers{ra: f, size: st.Size()}
			r.src = bufio.NewReaderSize(r.members, 64<<10)
		} else {
			zr, err := gzip.NewReader(r.src)
			if err != nil {
				return nil, fmt.Errorf("%s: read gzip header: %w", name, err)
			}
			r.src = bufio.NewReaderSize(zr, 64<<10)
		}
	} else if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
		return nil, fmt.Errorf("read %s: %w", name, err)
	} else if n := inputSize(in); n > 0 {
		r.size = n + int64(r.src.Buffered()) // what the peek took into the buffer is still to read
	}
	r.format = opt.Format
	if r.format == FormatUnknown {
		head, err := r.src.Peek(headSize)
		// A gzip stream cut short (ErrUnexpectedEOF) still has its head: the records report it.
		if err != nil && readErr(err) != io.EOF && err != bufio.ErrBufferFull {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		if r.format, err = detect(head, extFormat, opt.MaxRecordBytes); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	if r.format == FormatJSONLines {
		// Trust the extension: a .jsonl whose first line is damaged must not be read as one long
		// multi-line value.
		r.mode = jsonLines
	}
	return r, nil
}

// Format is the layout being read.
func (r *Reader) Format() Format { return r.format }

// Name is the file name messages use.
func (r *Reader) Name() string { return r.name }

// Warnings returns the first 100 problems found so far (skipped records, a truncated tail); Skipped
// counts them all.
func (r *Reader) Warnings() []error { return r.warnings }

// Tears describes each gzip member found torn in the middle of the file so far (a recorder that
// was killed and appended to without its tail being cut back): where it is and that what followed
// its last whole record is lost. The records around it are read.
func (r *Reader) Tears() []string {
	if r.members == nil {
		return nil
	}
	var out []string
	for _, t := range r.members.torn[:r.notedTorn] {
		if t.next >= 0 {
			out = append(out, t.String())
		}
	}
	return out
}

// Skipped is the number of records skipped as malformed (or truncated) so far.
func (r *Reader) Skipped() int { return r.skipped }

// Close closes the file Open opened.
func (r *Reader) Close() error {
	if r.closer != nil {
		return r.closer.Close()
	}
	return nil
}

// Next returns the next record, or io.EOF after the last. A malformed record is skipped and reported
// through the warnings (or, with Strict, returned as a *RecordError, after which Next keeps returning
// it). Any other error is a failure to read the file.
func (r *Reader) Next() (*Record, error) {
	for r.err == nil || r.resume() {
		var rec *Record
		var err error
		switch r.format {
		case FormatProto:
			rec, err = r.nextProto()
		case FormatJaegerJSON, FormatZipkinJSON:
			rec, err = r.nextTrace()
		default:
			rec, err = r.nextJSON()
		}
		if rec != nil {
			r.read++
			return rec, nil
		}
		var re *RecordError
		switch {
		case err == nil:
			continue // a blank line
		case errors.As(err, &re):
			r.warn(re)
			if r.opt.Strict && !errors.Is(re, ErrTruncated) {
				r.err = re
			}
		default:
			r.err = err
		}
	}
	return nil, r.err
}

// resume goes on after the records of a torn gzip member with the next member, reporting the
// tear; false when the input has really ended (or failed).
func (r *Reader) resume() bool {
	if r.members == nil {
		return false
	}
	for ; r.notedTorn < len(r.members.torn); r.notedTorn++ {
		// A torn last member is the ordinary end of a crashed recording: its cut record says
		// so. A tear in the middle is reported on its own (the cut record is counted as
		// skipped, the tear is not).
		if t := r.members.torn[r.notedTorn]; t.next >= 0 {
			r.skipped--
			r.warn(&RecordError{Pos: Position{File: r.name, Record: r.n + 1, Offset: t.start}, Err: errors.New(t.String())})
		}
	}
	if r.err != io.EOF || !r.members.next() {
		return false
	}
	r.err = nil
	r.src = bufio.NewReaderSize(r.members, 64<<10)
	return true
}

func (r *Reader) warn(err error) {
	r.skipped++
	if len(r.warnings) < maxKeptWarnings {
		r.warnings = append(r.warnings, err)
	}
	if r.opt.OnWarning != nil {
		r.opt.OnWarning(err)
	}
}

// readErr turns the end of the input into io.EOF. A gzip stream cut short (io.ErrUnexpectedEOF)
// also ends the input: what was decompressed before the cut is good, and the record in progress is
// reported as truncated by the caller.
func readErr(err error) error {
	if err == io.ErrUnexpectedEOF || err == errMemberTorn {
		return io.EOF
	}
	return err
}

// nextTrace returns the next trace of a Jaeger or Zipkin JSON document, reading and decoding the
// whole document on the first call. A document that does not decode is an error about the file,
// not a record to skip: nothing in it can be trusted to be complete.
func (r *Reader) nextTrace() (*Record, error) {
	if !r.docRead {
		r.docRead = true
		body, err := readDocument(r.src, r.name, r.format, r.opt.MaxRecordBytes, r.size)
		if err != nil {
			return nil, err
		}
		if r.format == FormatJaegerJSON {
			r.pending, _, err = DecodeJaegerJSON(body, r.opt.Decode)
		} else {
			r.pending, err = decodeZipkinJSON(body, r.opt.Decode)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.name, err)
		}
	}
	if len(r.pending) == 0 {
		return nil, io.EOF
	}
	b := r.pending[0]
	r.pending[0] = nil
	r.pending = r.pending[1:]
	r.n++
	rec := &Record{Batch: b, Pos: Position{File: r.name, Record: r.n}}
	if len(b.Spans) > 0 {
		rec.Pos.Trace = b.Spans[0].TraceID.String()
	}
	if r.opt.Raw {
		// Not nil for a trace without spans: an empty request is still a request (Raw's nil
		// says it was not asked for).
		rec.Raw = spans.AppendProto([]byte{}, b)
	}
	return rec, nil
}

// nextProto reads one length-prefixed record.
func (r *Reader) nextProto() (*Record, error) {
	pos := Position{File: r.name, Record: r.n + 1, Offset: r.off}
	var hdr [4]byte
	n, err := io.ReadFull(r.src, hdr[:])
	r.off += int64(n)
	if err != nil {
		if n == 0 && err == io.EOF {
			return nil, io.EOF
		}
		if n == 0 && err == io.ErrUnexpectedEOF {
			r.err = io.EOF
			r.n++
			return nil, &RecordError{Pos: pos, Err: errGzipCut}
		}
		if readErr(err) == io.EOF {
			r.err = io.EOF
			r.n++
			return nil, &RecordError{Pos: pos, Err: ErrTruncated}
		}
		return nil, fmt.Errorf("read %s: %w", r.name, err)
	}
	r.n++
	size := int64(binary.BigEndian.Uint32(hdr[:]))
	if size > int64(r.opt.MaxRecordBytes) {
		// Skip it: if the length was sound the next record follows; if it was garbage the reader
		// meets the end of the file or more garbage, both reported.
		skipped, err := io.CopyN(io.Discard, r.src, size)
		r.off += skipped
		if err != nil {
			if readErr(err) != io.EOF {
				return nil, fmt.Errorf("read %s: %w", r.name, err)
			}
			r.err = io.EOF
		}
		return nil, &RecordError{Pos: pos, Err: fmt.Errorf("%w: %d bytes, over the limit of %d (raise it with --max-record-bytes if the file is sound)", ErrTooLarge, size, r.opt.MaxRecordBytes)}
	}
	buf := make([]byte, size)
	n, err = io.ReadFull(r.src, buf)
	r.off += int64(n)
	if err != nil {
		if readErr(err) == io.EOF {
			r.err = io.EOF
			return nil, &RecordError{Pos: pos, Err: ErrTruncated}
		}
		return nil, fmt.Errorf("read %s: %w", r.name, err)
	}
	b, err := spans.DecodeProto(buf, r.opt.Decode)
	if err != nil {
		return nil, &RecordError{Pos: pos, Err: err} // "decode OTLP protobuf request: ..."
	}
	rec := &Record{Batch: b, Pos: pos}
	if r.opt.Raw {
		rec.Raw = buf
	}
	return rec, nil
}

// nextJSON reads one JSON record: a line, or in a pretty-printed file a value over several lines.
func (r *Reader) nextJSON() (*Record, error) {
	startLine := r.line + 1
	var body []byte
	var scan valueScanner
	discarding := false // a multi-line value went over the limit: skip to its end
	var mem *recordMemory
	if r.mode == jsonLines && !r.opt.Raw {
		if mem = r.spare.Swap(nil); mem == nil {
			mem = &recordMemory{}
		}
	}
	for {
		limit := r.opt.MaxRecordBytes - len(body)
		if discarding {
			limit = r.opt.MaxRecordBytes
		}
		var into []byte
		if mem != nil {
			into = mem.body[:0]
		}
		line, complete, tooLong, err := r.readLine(limit, into)
		if mem != nil && cap(line) > cap(mem.body) {
			mem.body = line[:0]
		}
		if err != nil && readErr(err) != io.EOF {
			return nil, fmt.Errorf("read %s: %w", r.name, err)
		}
		atEOF := !complete
		if atEOF {
			r.err = io.EOF // after this record
		}
		pos := Position{File: r.name, Line: startLine, Record: r.n + 1}
		if err == io.ErrUnexpectedEOF && len(body) == 0 && isBlank(line) {
			r.n++
			return nil, &RecordError{Pos: pos, Err: errGzipCut}
		}
		if tooLong {
			r.n++
			r.mode = jsonLines // a value's structure is lost with the discarded bytes: resynchronise on lines
			return nil, &RecordError{Pos: pos, Err: fmt.Errorf("%w: over the limit of %d bytes (raise it with --max-record-bytes if the file is sound)", ErrTooLarge, r.opt.MaxRecordBytes)}
		}
		if !discarding && len(body) == 0 && isBlank(line) {
			if atEOF {
				return nil, io.EOF
			}
			startLine = r.line + 1
			continue
		}
		if r.mode != jsonLines {
			scan.feed(line)
			if r.mode == jsonAuto {
				// The first record decides: a value that ends on its own line makes this a
				// JSON-lines file; one that goes on, a pretty-printed document.
				r.mode = jsonDocs
				if scan.done {
					r.mode = jsonLines
				}
			}
		}
		if discarding {
			if scan.done || atEOF {
				r.n++
				return nil, &RecordError{Pos: pos, Err: fmt.Errorf("%w: a value over the limit of %d bytes (raise it with --max-record-bytes if the file is sound)", ErrTooLarge, r.opt.MaxRecordBytes)}
			}
			continue
		}
		if body == nil {
			body = line // a fresh slice of its own: no second copy
		} else {
			body = append(body, line...)
		}
		if r.mode == jsonDocs && !scan.done && !atEOF {
			body = append(body, '\n')
			if len(body) > r.opt.MaxRecordBytes {
				discarding, body = true, nil
			}
			continue
		}
		r.n++
		if r.mode == jsonDocs && !scan.done {
			return nil, &RecordError{Pos: pos, Err: ErrTruncated}
		}
		rec, err := r.decodeJSON(body, pos, mem)
		if re := (*RecordError)(nil); atEOF && errors.As(err, &re) {
			// No newline at the end and the record does not decode: the tail of an interrupted
			// recording, not a malformed line.
			return nil, &RecordError{Pos: pos, Err: ErrTruncated}
		}
		return rec, err
	}
}

func (r *Reader) decodeJSON(body []byte, pos Position, mem *recordMemory) (*Record, error) {
	rec, err := r.decodeJSONRecord(body, pos, mem)
	if err != nil || len(rec.Batch.Spans) > 0 || rec.Batch.Rejected > 0 {
		return rec, err
	}
	// The decoder ignores unknown fields, as OTLP/JSON asks, so a JSON document of another kind
	// decodes to nothing: say so. At the start of the file it means the file is not a trace file.
	if err := checkShape(body); err != nil {
		if r.read == 0 && r.skipped == 0 {
			return nil, fmt.Errorf("%s: %w", pos, err)
		}
		return nil, &RecordError{Pos: pos, Err: err}
	}
	return rec, nil
}

// decodeJSONRecord decodes body, into mem's batch when there is one. A record whose body is a
// JSON line (mem not nil, even when it held nothing yet) hands its memory on to the next line
// once its consumer releases it.
func (r *Reader) decodeJSONRecord(body []byte, pos Position, mem *recordMemory) (*Record, error) {
	if !r.opt.Raw {
		var b *spans.Batch
		var err error
		if mem != nil && mem.batch != nil {
			b = mem.batch
			err = spans.DecodeJSONInto(b, body, r.opt.Decode)
		} else {
			b, err = spans.DecodeJSON(body, r.opt.Decode)
		}
		if err != nil {
			// The decoder's errors already say "decode OTLP/JSON request: ..." and where.
			return nil, &RecordError{Pos: pos, Err: err}
		}
		if mem != nil {
			mem.body, mem.batch = body[:0], b
			b.SetRelease(func() { r.spare.Store(mem) })
		}
		return &Record{Batch: b, Pos: pos}, nil
	}
	// The protobuf form is wanted anyway: transcode once and decode that.
	raw, err := JSONToProto(body)
	if err != nil {
		return nil, &RecordError{Pos: pos, Err: err}
	}
	b, err := spans.DecodeProto(raw, r.opt.Decode)
	if err != nil {
		return nil, &RecordError{Pos: pos, Err: fmt.Errorf("decode OTLP/JSON: %w", err)}
	}
	return &Record{Batch: b, Raw: raw, Pos: pos}, nil
}

// readLine returns the next line without its newline, in a fresh slice or appended to into (when
// not nil: a released record's memory); complete says the newline
// was there (else the input ended, err saying how). A line longer than limit is discarded to its end
// and reported as tooLong, so one huge line never has to fit in memory.
func (r *Reader) readLine(limit int, into []byte) (line []byte, complete, tooLong bool, err error) {
	line = into
	long := false // longer than src's buffer
	for {
		var frag []byte
		frag, err = r.src.ReadSlice('\n')
		if len(frag) > 0 && frag[len(frag)-1] == '\n' {
			complete = true
			r.line++
			frag = frag[:len(frag)-1]
		}
		if !tooLong && len(line)+len(frag) > limit {
			tooLong, line = true, nil
		}
		if !tooLong {
			if line == nil && err == bufio.ErrBufferFull {
				long = true
				line = make([]byte, 0, min(max(r.longLine, 2*len(frag)), limit))
			}
			line = append(line, frag...)
		}
		if err != bufio.ErrBufferFull {
			if long && !tooLong {
				r.longLine = len(line)
			}
			return line, complete, tooLong, err
		}
	}
}

// fileKind names what a file that is not a regular one is.
// inputSize is how many bytes in holds from where it is, when it can tell: a regular file's
// size past its offset, an in-memory reader's length; else 0.
func inputSize(in io.Reader) int64 {
	switch in := in.(type) {
	case *os.File:
		st, err := in.Stat()
		if err != nil || !st.Mode().IsRegular() {
			return 0
		}
		at, err := in.Seek(0, io.SeekCurrent)
		if err != nil {
			return 0
		}
		return max(st.Size()-at, 0)
	case interface{ Len() int }:
		return int64(in.Len())
	}
	return 0
}

func fileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeCharDevice != 0:
		return "a character device (a terminal, /dev/zero)"
	case m&os.ModeDevice != 0:
		return "a device"
	}
	return "not a regular file (" + m.Type().String() + ")"
}

// isRegular reports whether f is a regular file (it can be read at any offset).
func isRegular(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode().IsRegular()
}

func isBlank(b []byte) bool { return len(bytes.TrimSpace(b)) == 0 }

// valueScanner follows the strings and nesting of JSON fed to it piece by piece, to find where
// its first value ends: the end of a record in a pretty-printed file, and all of a foreign
// document checkDepth walks. It does not validate: the decoders do.
type valueScanner struct {
	depth int
	// max, when set, bounds the nesting: feed stops where it is passed.
	max   int
	inStr bool
	esc   bool
	done  bool
}

// feed follows b, and returns the offset in b of the bracket that nests deeper than max, or -1.
// A document is mostly strings, and this runs over every byte of a file of millions of spans: a
// string's content is skipped a word at a time (jsonlex.SkipPlain).
func (s *valueScanner) feed(b []byte) int {
	for i := 0; i < len(b) && !s.done; i++ {
		if s.inStr {
			if s.esc {
				s.esc = false
				continue
			}
			if i = jsonlex.SkipPlain(b, i); i == len(b) {
				break
			}
			s.esc = b[i] == '\\'
			s.inStr = b[i] != '"' // or a control character: not JSON, but the string goes on
			continue
		}
		switch b[i] {
		case '"':
			s.inStr = true
		case '{', '[':
			if s.depth++; s.max > 0 && s.depth > s.max {
				return i
			}
		case '}', ']':
			s.depth--
			s.done = s.depth <= 0
		}
	}
	return -1
}
