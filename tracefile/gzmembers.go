package tracefile

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
)

// A recording compressed with gzip is one gzip member per session of the recorder: a collector
// restarted with the same --record appends a member. A session killed mid-write leaves its member
// without its end (the rest of the deflate stream, the trailer), and the next session's member
// follows it: decompressed as one stream, the next member's bytes are read as the torn one's
// deflate data, and everything after the tear is lost. gzipMembers reads member by member instead,
// so that a torn member costs only its own cut record.

// errMemberTorn ends the records of a torn member that another member follows: the reader treats
// it as the end of a file (the record in progress is cut short) and then goes on with the next
// member (see Reader.resume).
var errMemberTorn = errors.New("gzip member torn")

// gzipMagic starts every gzip member: the two magic bytes and deflate, the one method.
var gzipMagic = []byte{0x1f, 0x8b, 0x08}

// tornMember is a gzip member that ends before its trailer: where it starts, why it could not be
// read to its end, and where the next member starts (-1: none, it is the file's last).
type tornMember struct {
	start, next int64
	err         error
}

// gzipMembers decompresses the gzip members of a file in turn, knowing where each starts.
type gzipMembers struct {
	ra    io.ReaderAt
	size  int64
	off   int64 // where the current member starts
	limit int64 // where the next member starts, -1 for none
	cr    *countingReader
	zr    *gzip.Reader
	torn  []tornMember
	// stop is the error Read keeps returning after a tear until the reader goes on (next): a
	// buffered reader that swallows one error (bufio's Peek) must not glue the next member's
	// records to the torn one's.
	stop error
}

// next goes on after a tear with the next member; false when there is none.
func (g *gzipMembers) next() bool {
	if g.stop != errMemberTorn {
		return false
	}
	g.stop = nil
	return true
}

// countingReader counts the bytes read through it. It is a flate.Reader (a ByteReader), so a gzip
// reader reads through it without a buffer of its own and the count ends exactly where the member
// does.
type countingReader struct {
	r *bufio.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

// open starts reading the member at g.off, up to where the next one starts: a torn member's
// deflate decoder must not go on into the next member's bytes and make records of them.
func (g *gzipMembers) open() error {
	g.limit = g.nextMember(g.off + 1)
	end := g.limit
	if end < 0 {
		end = g.size
	}
	g.cr = &countingReader{r: bufio.NewReaderSize(io.NewSectionReader(g.ra, g.off, end-g.off), 64<<10)}
	if g.zr == nil {
		zr, err := gzip.NewReader(g.cr)
		if err != nil {
			return err
		}
		g.zr = zr
	} else if err := g.zr.Reset(g.cr); err != nil {
		return err
	}
	g.zr.Multistream(false)
	return nil
}

// Read is the decompressed bytes of the members, one after the other. At a torn member that
// another follows it returns errMemberTorn (after the bytes the torn member gave); reading on
// goes on with the next member. A torn last member ends with io.ErrUnexpectedEOF, as one
// decompressed stream would.
func (g *gzipMembers) Read(p []byte) (int, error) {
	if g.stop != nil {
		return 0, g.stop
	}
	for {
		if g.cr == nil {
			if g.off >= g.size {
				return 0, io.EOF
			}
			if err := g.open(); err != nil {
				return 0, g.tear(err)
			}
		}
		n, err := g.zr.Read(p)
		if n > 0 {
			return n, nil // the gzip reader's error is sticky: the next Read returns it
		}
		switch err {
		case nil:
			continue // a block without output (a sync flush's empty one)
		case io.EOF:
			g.off += g.cr.n // the member ended with its trailer
			g.cr = nil
			continue
		}
		return 0, g.tear(err)
	}
}

// tear records that the member at g.off could not be read to its end because of err, and moves
// on to the next member: the first place after the member's start where a member can be read.
func (g *gzipMembers) tear(err error) error {
	if err == io.EOF {
		err = io.ErrUnexpectedEOF // a header or a member cut short
	}
	t := tornMember{start: g.off, next: g.limit, err: err}
	g.torn = append(g.torn, t)
	g.cr = nil
	if t.next < 0 {
		g.off = g.size
		g.stop = io.ErrUnexpectedEOF
	} else {
		g.off = t.next
		g.stop = errMemberTorn
	}
	return g.stop
}

// nextMember is the offset of the first gzip member at or after from, -1 when there is none: where
// the magic bytes start a header that parses and a deflate stream that decodes for a while (the
// magic bytes alone can occur inside compressed data).
func (g *gzipMembers) nextMember(from int64) int64 {
	buf := make([]byte, 64<<10)
	for from < g.size {
		n, err := g.ra.ReadAt(buf, from)
		if n < len(gzipMagic) {
			return -1
		}
		chunk := buf[:n]
		for k := 0; ; {
			i := bytes.Index(chunk[k:], gzipMagic)
			if i < 0 {
				break
			}
			at := from + int64(k+i)
			if g.plausible(at) {
				return at
			}
			k += i + 1
		}
		if err != nil {
			return -1
		}
		from += int64(n - len(gzipMagic) + 1)
	}
	return -1
}

// lastMember is the offset of the file's last gzip member, -1 when none is found: the last place
// where a member's header is plausible, looked for from the end.
func (g *gzipMembers) lastMember() int64 {
	off, _ := lastIndex(g.ra, g.size, gzipMagic, g.plausible)
	return off
}

// lastIndex is the offset of the last place in the size bytes of ra where pat starts and ok (nil:
// any) accepts, -1 when there is none. It reads backwards a chunk at a time, so finding the end of
// a large file costs only its end.
func lastIndex(ra io.ReaderAt, size int64, pat []byte, ok func(off int64) bool) (int64, error) {
	buf := make([]byte, 64<<10)
	for end := size; end > 0; {
		start := max(0, end-int64(len(buf)))
		chunk := buf[:end-start]
		if _, err := ra.ReadAt(chunk, start); err != nil && err != io.EOF {
			return -1, err
		}
		for k := len(chunk); k > 0; {
			i := bytes.LastIndex(chunk[:k], pat)
			if i < 0 {
				break
			}
			if ok == nil || ok(start+int64(i)) {
				return start + int64(i), nil
			}
			k = i + len(pat) - 1
		}
		if start == 0 {
			return -1, nil
		}
		end = start + int64(len(pat)) - 1 // a match across the chunks' edge
	}
	return -1, nil
}

// plausible reports whether a gzip member starts at off: besides the magic bytes, the header's
// reserved flag bits are clear, its extra flags say a compression level (0, 2 or 4), its
// operating system is one the format names (0-13, or 255 for unknown), and the whole header
// parses. Random bytes pass all of it about once in 10^17 places; the member's deflate data is not
// looked at, since a member torn right after its header is still where the next records start.
func (g *gzipMembers) plausible(off int64) bool {
	var h [10]byte
	if n, _ := g.ra.ReadAt(h[:], off); n < len(h) {
		return false
	}
	if h[3]&0xe0 != 0 || h[8] != 0 && h[8] != 2 && h[8] != 4 || h[9] > 13 && h[9] != 255 {
		return false
	}
	_, err := gzip.NewReader(bufio.NewReader(io.NewSectionReader(g.ra, off, g.size-off)))
	return err == nil
}

// tornNote says what a torn member cost, for the reader's warnings and the recorder's message.
func (t tornMember) String() string {
	if t.next < 0 {
		return fmt.Sprintf("the gzip member at byte %d ends without its trailer (%v): its last record is cut short", t.start, t.err)
	}
	return fmt.Sprintf("the gzip member at byte %d is torn (%v): what followed its last whole record is lost; reading goes on with the member at byte %d", t.start, t.err, t.next)
}
