package collector

import (
	"sync"

	"google.golang.org/grpc/mem"

	"github.com/stormwatch/stormwatch/spans"
)

// Request bodies are the collector's largest allocation: one per request (about 58 KB for 100
// spans), alive only until the consumer has copied what it keeps. A consumer that says so
// (spans.Batch.Release: the analyzer does) gives the body back, and the next request reads into
// it: less for the garbage collector to sweep and fewer collections. A consumer that keeps spans
// never releases, and its bodies stay with the garbage collector as before.
//
// bodyPool keeps buffers in power-of-four size classes from 4 KiB to 4 MiB, one sync.Pool each (so
// idle buffers go at garbage collections); a larger body is allocated for itself and not kept.
// What it holds is bounded by the ingest queue, which bounds the bodies in use. Unlike grpc-go's
// tiered pool (mem.NewBinaryTieredBufferPool, which clears every buffer it hands out: 1.3% of the
// collector's CPU) it does not clear them: the collector reads a body only as far as it wrote it.
type bodyPool struct {
	tiers [bodyTiers]sync.Pool
}

const (
	bodyTiers   = 6
	bodyMinSize = 4 << 10 // the smallest class; class k holds bodyMinSize<<(2k) bytes
)

func newBodyPool() mem.BufferPool { return &bodyPool{} }

// tier is the class of a body of n bytes, or -1 past the largest.
func bodyTier(n int) int {
	for k := range bodyTiers {
		if n <= bodyMinSize<<(2*k) {
			return k
		}
	}
	return -1
}

// Get returns a buffer of length n, its contents whatever its last use left.
func (p *bodyPool) Get(n int) *[]byte {
	k := bodyTier(n)
	if k < 0 {
		b := make([]byte, n)
		return &b
	}
	if b, ok := p.tiers[k].Get().(*[]byte); ok {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n, bodyMinSize<<(2*k))
	return &b
}

// Put keeps b for a later Get of its class; buffers not made by Get for a class are dropped.
func (p *bodyPool) Put(b *[]byte) {
	if k := bodyTier(cap(*b)); k >= 0 && cap(*b) == bodyMinSize<<(2*k) {
		p.tiers[k].Put(b)
	}
}

// WithBodyPool makes the collector read request bodies into buffers of p and give them back when
// nothing refers to them any more. Tests pass a pool that checks or poisons what comes back; the
// default is the collector's own (newBodyPool).
func WithBodyPool(p mem.BufferPool) Option { return func(c *Collector) { c.bodies = p } }

// A request's memory - its body and the batch decoded from it - is needed by the consumer until
// it releases the batch, and (the body) by the recorder until it has written the request. hold
// counts them; the last one gives both back (recycle), for the next request to be read and
// decoded into.
func (c *Collector) hold(it *item) {
	n := int32(1)
	if c.rec != nil {
		n++
	}
	it.holds.Store(n)
	it.batch.SetRelease(func() { c.unhold(it) })
}

// unhold drops one hold on it's memory, and gives it back with the last.
func (c *Collector) unhold(it *item) {
	if it.holds.Add(-1) == 0 {
		c.recycle(it.buf, it.batch)
	}
}

// recycle gives back a request's body (when it is the pool's) and batch.
func (c *Collector) recycle(buf *[]byte, b *spans.Batch) {
	if buf != nil {
		c.bodies.Put(buf)
	}
	if b != nil {
		c.batches.Put(b)
	}
}

// batch is a batch to decode a request into: one given back by an earlier request, or a new one.
func (c *Collector) batch() *spans.Batch {
	if b, ok := c.batches.Get().(*spans.Batch); ok {
		return b
	}
	return &spans.Batch{}
}
