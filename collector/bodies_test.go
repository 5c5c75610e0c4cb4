package collector

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/suite"
	"github.com/stormwatch/stormwatch/fixtures"
	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/tracefile"
)

// trackingPool hands out the collector's own pool's buffers and checks that each comes back at
// most once, and only one it handed out. With poison on, a buffer given back is overwritten at
// once, as the next request read into it would: whatever still aliases it reads 0xEE.
type trackingPool struct {
	inner  mem.BufferPool
	poison bool

	mu         sync.Mutex
	out        map[*[]byte]bool
	gets, puts int
	bad        []string
}

func newTrackingPool(poison bool) *trackingPool {
	return &trackingPool{inner: newBodyPool(), poison: poison, out: map[*[]byte]bool{}}
}

func (p *trackingPool) Get(n int) *[]byte {
	b := p.inner.Get(n)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.out[b] = true
	p.gets++
	return b
}

func (p *trackingPool) Put(b *[]byte) {
	p.mu.Lock()
	if !p.out[b] {
		p.bad = append(p.bad, "a buffer came back twice, or was never handed out")
	}
	delete(p.out, b)
	p.puts++
	p.mu.Unlock()
	if p.poison {
		full := (*b)[:cap(*b)]
		for i := range full {
			full[i] = 0xEE
		}
	}
	p.inner.Put(b)
}

// counts returns buffers handed out, given back, and still out.
func (p *trackingPool) counts(t *testing.T) (gets, puts, out int) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, b := range p.bad {
		t.Error(b)
	}
	p.bad = nil
	return p.gets, p.puts, len(p.out)
}

// copyingSink is a consumer like the analyzer: it copies what it keeps (packs and unpacks each
// batch, which copies every string) and releases the batch.
type copyingSink struct {
	mu  sync.Mutex
	got []spans.Span
}

func (s *copyingSink) ConsumeBatch(_ context.Context, b *spans.Batch) error {
	own, err := spans.UnpackSpans(spans.AppendPacked(nil, b.Spans))
	if err != nil {
		return err
	}
	b.Release()
	s.mu.Lock()
	s.got = append(s.got, own...)
	s.mu.Unlock()
	return nil
}

func (s *copyingSink) spans() []spans.Span {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got)
}

// A consumer that releases its batches gets every span once and intact while the bodies go back
// to the pool - each exactly once, after the recorder too has written it - and the queue's
// request and byte counts return to zero.
func TestReleasedBodiesGoBackOnce(t *testing.T) {
	for _, ek := range allExporters {
		for _, record := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/record=%v", ek.name, record), func(t *testing.T) {
				pool := newTrackingPool(true)
				s := &copyingSink{}
				opts := []Option{WithBodyPool(pool)}
				rec := &fakeRecorder{}
				if record {
					opts = append(opts, WithRecorder(rec))
				}
				c := start(t, Config{}, s, opts...)
				const n = 40
				emitVia(t, ek, c, n)
				waitFor(t, "spans delivered", func() bool { return len(s.spans()) >= n })
				waitFor(t, "every body given back", func() bool {
					_, _, out := pool.counts(t)
					return out == 0
				})
				checkEveryAttemptOnce(t, s.spans(), n, false)
				gets, puts, _ := pool.counts(t)
				if gets < n/16 || puts != gets {
					t.Errorf("pool: %d buffers handed out, %d given back; want at least %d, all back", gets, puts, n/16)
				}
				if st := c.Stats(); st.QueueDepth != 0 || st.QueueBytes != 0 {
					t.Errorf("queue after delivery: %d requests, %d bytes; want 0, 0", st.QueueDepth, st.QueueBytes)
				}
				if record {
					// The recorder copied each body before it went back: they decode to every span.
					bodies, _, _ := rec.snapshot()
					var recorded []spans.Span
					for i := range bodies {
						b, err := spans.DecodeProto(rec.bodies[i], spans.DecodeOptions{})
						if err != nil {
							t.Fatalf("recorded request %d: %v", i, err)
						}
						recorded = append(recorded, b.Spans...)
					}
					checkEveryAttemptOnce(t, recorded, n, false)
				}
			})
		}
	}
}

// A consumer that keeps its batches never releases them: no body goes back to the pool, so the
// kept spans stay intact however many requests follow.
func TestKeptBatchesKeepTheirBodies(t *testing.T) {
	for _, ek := range allExporters {
		t.Run(ek.name, func(t *testing.T) {
			pool := newTrackingPool(true)
			s := &sink{}
			c := start(t, Config{}, s, WithBodyPool(pool))
			const n = 40
			emitVia(t, ek, c, n)
			waitFor(t, "spans delivered", func() bool { return s.count() >= n })
			checkEveryAttemptOnce(t, s.spans(), n, false)
			if gets, puts, out := pool.counts(t); gets == 0 || out != gets || puts != 0 {
				t.Errorf("pool: %d handed out, %d given back, %d out; want none back", gets, puts, out)
			}
		})
	}
}

// The poisoning pool does catch a consumer that releases a batch and keeps its strings: the test
// above would fail for one, and so would TestAnalyzerKeepsNothingOfReleasedBodies.
func TestPoisonedPoolCatchesAConsumerThatKeepsAliases(t *testing.T) {
	pool := newTrackingPool(true)
	var mu sync.Mutex
	var kept []spans.Span
	liar := spans.ConsumerFunc(func(_ context.Context, b *spans.Batch) error {
		mu.Lock()
		kept = append(kept, b.Spans...) // keeps the spans, which alias the body...
		mu.Unlock()
		b.Release() // ...and says it does not
		return nil
	})
	c := start(t, Config{}, liar, WithBodyPool(pool))
	resp := post(t, c, protoBody(t, request(0, 4, 0)), map[string]string{"Content-Type": contentTypeProto})
	resp.Body.Close()
	waitFor(t, "the body given back", func() bool { _, puts, _ := pool.counts(t); return puts == 1 })
	mu.Lock()
	defer mu.Unlock()
	if len(kept) != 4 {
		t.Fatalf("kept %d spans, want 4", len(kept))
	}
	if name := kept[0].Name; strings.HasPrefix(name, "GET /item/") {
		t.Errorf("span name %q survived the poisoning: the pool would not catch a lying consumer", name)
	}
}

// Requests that never reach the consumer give their bodies back at once: malformed, too large
// once decompressed, empty of spans, refused by a full queue.
func TestRefusedRequestsGiveTheirBodiesBack(t *testing.T) {
	pool := newTrackingPool(true)
	s := &sink{gate: make(chan struct{})}
	body := protoBody(t, request(0, 10, 0))
	c := start(t, Config{QueueSize: 1, MaxRequestBytes: int64(2 * len(body))}, s, WithBodyPool(pool))
	proto := map[string]string{"Content-Type": contentTypeProto}
	for _, tc := range []struct {
		name    string
		body    []byte
		headers map[string]string
		want    int
	}{
		{"held by the blocked consumer", body, proto, http.StatusOK},
		{"queue full", body, proto, http.StatusTooManyRequests},
		{"malformed", []byte{0x0a, 0xff}, proto, http.StatusBadRequest},
		{"no spans", nil, proto, http.StatusOK},
		{"too large once decompressed", gzipped(t, bytes.Repeat([]byte{0x0a, 0x00}, 2*len(body))),
			map[string]string{"Content-Type": contentTypeProto, "Content-Encoding": "gzip"}, http.StatusRequestEntityTooLarge},
	} {
		resp := post(t, c, tc.body, tc.headers)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Fatalf("%s: status %d, want %d", tc.name, resp.StatusCode, tc.want)
		}
		// Only the first request's body is out: the consumer holds its batch.
		if gets, _, out := pool.counts(t); out != 1 {
			t.Errorf("after %q: %d buffers out of %d handed out, want 1 (the held request's)", tc.name, out, gets)
		}
	}
	close(s.gate)
	waitFor(t, "the held request delivered", func() bool { return s.count() == 10 })
}

// The analyzer packs what it keeps and releases every batch: fed through the collector with every
// released body poisoned at once, its report is the report of the same requests decoded from
// copies that nothing ever overwrites.
func TestAnalyzerKeepsNothingOfReleasedBodies(t *testing.T) {
	var lines [][]byte
	for _, name := range []string{"amplification-27-reference", "fanout-stock", "breaker-wrong-key-reference"} {
		data, err := fixtures.Read(name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			lines = append(lines, bytes.Clone(sc.Bytes()))
		}
	}
	newAnalyzer := func() *engine.Engine {
		return engine.New(engine.Config{Detectors: suite.Default(), Settle: time.Hour})
	}
	want := newAnalyzer()
	for i, line := range lines {
		b, err := spans.DecodeJSON(bytes.Clone(line), spans.DecodeOptions{})
		if err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		if err := want.ConsumeBatch(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	want.Flush()
	for _, transport := range []string{"http/json", "grpc"} {
		t.Run(transport, func(t *testing.T) {
			pool := newTrackingPool(true)
			a := newAnalyzer()
			c := start(t, Config{}, a, WithBodyPool(pool))
			client := coltracepb.NewTraceServiceClient(dialGRPC(t, c))
			for i, line := range lines {
				if transport == "grpc" {
					// OTLP/JSON's ids are hex, not protojson's base64: transcoded as a recording is.
					body, err := tracefile.JSONToProto(line)
					if err != nil {
						t.Fatalf("line %d: %v", i, err)
					}
					var req coltracepb.ExportTraceServiceRequest
					if err := proto.Unmarshal(body, &req); err != nil {
						t.Fatalf("line %d: %v", i, err)
					}
					if _, err := client.Export(context.Background(), &req); err != nil {
						t.Fatalf("line %d: %v", i, err)
					}
					continue
				}
				resp := post(t, c, line, map[string]string{"Content-Type": contentTypeJSON})
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("line %d: status %d", i, resp.StatusCode)
				}
			}
			waitFor(t, "every body given back", func() bool {
				_, puts, out := pool.counts(t)
				return out == 0 && puts == len(lines)
			})
			a.Flush()
			got, exp := a.Report(), want.Report()
			if got.Input.Spans != exp.Input.Spans || !reflect.DeepEqual(got, exp) {
				t.Errorf("report through the collector differs from the report of unpoisoned copies:\n got %+v\nwant %+v", got, exp)
			}
		})
	}
}

// The body pool hands out buffers of the length asked for, in the capacity of their class, takes
// back only its own classes' buffers, and hands a given-back buffer out again.
func TestBodyPoolClasses(t *testing.T) {
	p := newBodyPool()
	for _, n := range []int{0, 1, 4 << 10, 4<<10 + 1, 58 << 10, 4 << 20, 4<<20 + 1} {
		b := p.Get(n)
		want := 4 << 10
		for want < n {
			want <<= 2
		}
		if len(*b) != n || (n <= 4<<20 && cap(*b) != want) {
			t.Errorf("Get(%d): len %d cap %d, want len %d cap %d", n, len(*b), cap(*b), n, want)
		}
		p.Put(b)
	}
	odd := make([]byte, 100, 5000) // not a class's capacity: dropped, never handed out
	p.Put(&odd)
	reused := false
	for range 20 { // sync.Pool may drop a buffer (it does at random under the race detector)
		b := p.Get(50 << 10)
		if cap(*b) != 64<<10 {
			t.Fatalf("Get(50 KiB): cap %d, want 64 KiB", cap(*b))
		}
		(*b)[0] = 0x5a
		p.Put(b)
		if c := p.Get(60 << 10); (*c)[0] == 0x5a {
			reused = true
			break
		}
	}
	if !reused {
		t.Error("a buffer given back was never handed out again")
	}
}
