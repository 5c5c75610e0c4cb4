package collector

import (
	"google.golang.org/grpc/mem"
)

// Request bodies are the collector's largest allocation: one per request (about 58 KB for 100
// spans), alive only until the consumer has copied what it keeps. A consumer that says so
// (spans.Batch.Release: the analyzer does) gives the body back, and the next request reads into
// it: less for the garbage collector to sweep and fewer collections. A consumer that keeps spans
// never releases, and its bodies stay with the garbage collector as before.
//
// The pool is grpc-go's tiered buffer pool (powers of four from 4 KiB to 4 MiB, larger bodies in
// its fallback pool), whose buffers sync.Pool lets go of when the process goes idle. What it holds
// is bounded by the ingest queue, which bounds the bodies in use.
func newBodyPool() mem.BufferPool {
	p, err := mem.NewBinaryTieredBufferPool(12, 14, 16, 18, 20, 22)
	if err != nil {
		panic("collector: body pool tiers: " + err.Error()) // the tiers above are valid
	}
	return p
}

// WithBodyPool makes the collector read request bodies into buffers of p and give them back when
// nothing refers to them any more. Tests pass a pool that checks or poisons what comes back; the
// default is the collector's own (newBodyPool).
func WithBodyPool(p mem.BufferPool) Option { return func(c *Collector) { c.bodies = p } }

// hold tracks who still needs a pooled body: the consumer until it releases the batch, and the
// recorder until it has written the request. The last one gives the body back.
func (c *Collector) holdBody(it *item) {
	n := int32(1)
	if c.rec != nil {
		n++
	}
	it.holds.Store(n)
	it.batch.SetRelease(func() { c.unholdBody(it) })
}

// unholdBody drops one hold on it's body, and gives the body back with the last.
func (c *Collector) unholdBody(it *item) {
	if it.buf == nil || it.holds.Add(-1) != 0 {
		return
	}
	c.bodies.Put(it.buf)
}

// recycleBody gives back a body nothing was handed: its request was refused or decoded to
// nothing.
func (c *Collector) recycleBody(buf *[]byte) {
	if buf != nil {
		c.bodies.Put(buf)
	}
}
