package tracefile

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Recovery is what Append found at the end of an existing recording and did about it. A recorder
// killed mid-write (kill -9, a crash, a full disk) leaves its last record cut short and, for .gz,
// its gzip member without its end; appending after that would leave the cut record in the middle
// of the file and, for .gz, make the next session's member unreadable to gzip tools.
type Recovery struct {
	// Torn says the file ended in the middle of a record or of a gzip member; the rest is zero
	// when it did not.
	Torn bool
	// Kept is how many whole records the damaged part held and kept: the records after the last
	// whole gzip member for .gz (recompressed as a whole member), none to count otherwise (the
	// file is cut back in place).
	Kept int
	// CutBytes are the bytes of the cut record dropped (uncompressed, for .gz).
	CutBytes int64
	// Size and NewSize are the file's sizes before and after.
	Size, NewSize int64
}

// String says what was done, for the collector's log.
func (r Recovery) String() string {
	if !r.Torn {
		return "the recording ends with a whole record"
	}
	if r.CutBytes == 0 && r.Kept == 1 && r.NewSize == r.Size+1 {
		return "the recording's last record lacked its newline (a crash of the recorder): the newline was added, nothing cut"
	}
	s := fmt.Sprintf("the recording ended in the middle of a record (a crash of the recorder): cut back to its last whole record, dropping %d bytes of the cut record", r.CutBytes)
	if r.Kept > 0 {
		s += fmt.Sprintf("; %d whole records after the last whole gzip member were kept in a gzip member of their own", r.Kept)
	}
	return s + fmt.Sprintf(" (%d -> %d bytes)", r.Size, r.NewSize)
}

// recoverTail checks the end of the existing recording at path and cuts a torn tail back to the
// last whole record, in place for the uncompressed layouts (truncating is safe) and by writing
// the repaired file beside it and renaming it over for .gz (the file is never without its
// records, whenever the process dies).
func recoverTail(path string, format Format, gz bool) (Recovery, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return Recovery{}, nil
	}
	if err != nil {
		return Recovery{}, fmt.Errorf("open trace file to check its end: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Recovery{}, fmt.Errorf("check trace file %s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return Recovery{}, fmt.Errorf("trace file %s is not a regular file", path)
	}
	size := st.Size()
	if size == 0 {
		return Recovery{}, nil
	}
	if gz {
		return recoverGzip(f, path, size, format)
	}
	var whole int64
	switch format {
	case FormatJSONLines:
		whole, err = lastIndex(f, size, []byte{'\n'}, nil)
		whole++ // just after the last newline; 0 when there is none
	case FormatProto:
		whole, _, err = wholeFrames(bufio.NewReaderSize(io.NewSectionReader(f, 0, size), 256<<10), nil)
	default:
		return Recovery{}, nil
	}
	if err != nil {
		return Recovery{}, fmt.Errorf("check the end of trace file %s: %w", path, err)
	}
	if whole == size {
		return Recovery{}, nil
	}
	if format == FormatJSONLines && size-whole <= DefaultMaxRecordBytes {
		// A last line that is a whole JSON value without its newline was read as a record
		// before the restart (see Reader): it is ended, not cut.
		tail := make([]byte, size-whole)
		if _, err := f.ReadAt(tail, whole); err == nil && json.Valid(tail) {
			if _, err := f.WriteAt([]byte{'\n'}, size); err != nil {
				return Recovery{}, fmt.Errorf("end the last line of trace file %s: %w", path, err)
			}
			if err := f.Sync(); err != nil {
				return Recovery{}, fmt.Errorf("sync trace file %s: %w", path, err)
			}
			return Recovery{Torn: true, Kept: 1, Size: size, NewSize: size + 1}, nil
		}
	}
	if err := f.Truncate(whole); err != nil {
		return Recovery{}, fmt.Errorf("cut trace file %s back to its last whole record: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return Recovery{}, fmt.Errorf("sync trace file %s: %w", path, err)
	}
	return Recovery{Torn: true, CutBytes: size - whole, Size: size, NewSize: whole}, nil
}

// wholeFrames reads length-prefixed protobuf records from r, copying each whole one to w (when
// not nil), and returns the bytes of whole records and how many there were. A record is whole when
// all the bytes its length says are there, however large (a reader may be told to take records
// over its default limit): only the end of the input cuts one. A frame is read into memory as its
// bytes arrive, so a length that is garbage costs no more than the bytes that follow it.
func wholeFrames(r *bufio.Reader, w io.Writer) (int64, int, error) {
	var n int64
	records := 0
	var hdr [4]byte
	var body bytes.Buffer
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return n, records, readEnd(err)
		}
		size := int64(binary.BigEndian.Uint32(hdr[:]))
		if w == nil {
			if d, err := r.Discard(int(size)); int64(d) < size {
				return n, records, readEnd(err)
			}
		} else {
			body.Reset()
			if got, err := io.CopyN(&body, r, size); got < size {
				return n, records, readEnd(err)
			}
			if _, err := w.Write(hdr[:]); err != nil {
				return n, records, err
			}
			if _, err := w.Write(body.Bytes()); err != nil {
				return n, records, err
			}
		}
		n += 4 + size
		records++
	}
}

// wholeLines copies the whole lines of r to w and returns their bytes and number.
func wholeLines(r *bufio.Reader, w io.Writer) (int64, int, error) {
	var n int64
	records := 0
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			// A last line that is a whole JSON value without its newline was read as a
			// record (see Reader): kept, and ended.
			if len(line) > 0 && readEnd(err) == nil && json.Valid(line) {
				if _, err := w.Write(append(line, '\n')); err != nil {
					return n, records, err
				}
				n += int64(len(line))
				records++
			}
			return n, records, readEnd(err)
		}
		if _, err := w.Write(line); err != nil {
			return n, records, err
		}
		n += int64(len(line))
		records++
	}
}

// readEnd is nil for the ends of input a torn tail shows (the end of the file, a gzip stream cut
// short or damaged, a torn member), the error otherwise.
func readEnd(err error) error {
	var ce flate.CorruptInputError
	if err == nil || err == io.EOF || err == io.ErrUnexpectedEOF || err == errMemberTorn ||
		errors.As(err, &ce) || errors.Is(err, gzip.ErrChecksum) || errors.Is(err, gzip.ErrHeader) {
		return nil
	}
	return err
}

// recoverGzip checks the last gzip member of a .gz recording. When it is torn, the file is
// rewritten beside itself - its whole members as they are, then the torn member's whole records
// as a member of their own - and renamed over the original.
func recoverGzip(f *os.File, path string, size int64, format Format) (Recovery, error) {
	g := &gzipMembers{ra: f, size: size}
	last := g.lastMember()
	if last < 0 {
		return Recovery{}, fmt.Errorf("trace file %s does not hold a gzip recording (no gzip member found): move it away or record to another name", path)
	}
	// The last member alone: the members before it were ended by their sessions (a torn one
	// among them is read past by the reader).
	g.off = last
	if _, err := io.Copy(io.Discard, g); readEnd(err) != nil {
		return Recovery{}, fmt.Errorf("check the end of trace file %s: %w", path, err)
	}
	if len(g.torn) == 0 {
		return Recovery{}, nil
	}
	tmpPath := path + ".repairing"
	tmp, err := os.OpenFile(tmpPath, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return Recovery{}, fmt.Errorf("repair trace file %s: %w", path, err)
	}
	defer os.Remove(tmpPath) // gone after the rename; left by a failure otherwise
	defer tmp.Close()
	if _, err := io.Copy(tmp, io.NewSectionReader(f, 0, last)); err != nil {
		return Recovery{}, fmt.Errorf("repair trace file %s: %w", path, err)
	}
	// The torn member's records, decompressed as far as they go.
	rec := Recovery{Torn: true, Size: size}
	if zr, err := gzip.NewReader(bufio.NewReader(io.NewSectionReader(f, last, size-last))); err == nil {
		zr.Multistream(false)
		all := &countingReader{r: bufio.NewReader(zr)}
		src := bufio.NewReaderSize(all, 256<<10)
		bw := bufio.NewWriterSize(tmp, 256<<10)
		zw, _ := gzip.NewWriterLevel(bw, gzip.BestSpeed)
		var whole int64
		if format == FormatProto {
			whole, rec.Kept, err = wholeFrames(src, zw)
		} else {
			whole, rec.Kept, err = wholeLines(src, zw)
		}
		if err != nil {
			return Recovery{}, fmt.Errorf("repair trace file %s: %w", path, err)
		}
		if _, err := io.Copy(io.Discard, src); readEnd(err) != nil {
			return Recovery{}, fmt.Errorf("repair trace file %s: %w", path, err)
		}
		rec.CutBytes = all.n - whole
		if rec.Kept > 0 {
			if err := zw.Close(); err != nil {
				return Recovery{}, fmt.Errorf("repair trace file %s: %w", path, err)
			}
		}
		if err := bw.Flush(); err != nil {
			return Recovery{}, fmt.Errorf("repair trace file %s: %w", path, err)
		}
	}
	if err := tmp.Sync(); err != nil {
		return Recovery{}, fmt.Errorf("repair trace file %s: %w", path, err)
	}
	st, err := tmp.Stat()
	if err != nil {
		return Recovery{}, fmt.Errorf("repair trace file %s: %w", path, err)
	}
	rec.NewSize = st.Size()
	if err := os.Rename(tmpPath, path); err != nil {
		return Recovery{}, fmt.Errorf("repair trace file %s: %w", path, err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return Recovery{}, fmt.Errorf("repair trace file %s: %w", path, err)
	}
	return rec, nil
}
