package collector

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stormwatch/stormwatch/spans"
)

// item is one accepted request on its way to the consumer and the recorder.
type item struct {
	batch *spans.Batch
	// body is the request as received (decompressed); the batch's strings may alias it.
	body []byte
	json bool
	// buf is body's pooled buffer, nil when body is not from the pool; holds counts who still
	// needs it and the batch (bodies.go). Every field but holds is set before the item is
	// admitted and only read after.
	buf   *[]byte
	holds atomic.Int32
	// refs counts the stages (consumer, recorder) that still need the item; the last one releases
	// its place in the queue.
	refs atomic.Int32
	// durable, with Config.RecordSync, gets the outcome of recording the request durably: the
	// answer to the client waits for it.
	durable chan error
}

// queue bounds what the collector holds between accepting a request and the consumer (and recorder)
// being done with it, by request count and by body bytes. Admission reserves room in every stage at
// once, so the channel sends below never block: a full queue is a 429 at the door, not a stall.
type queue struct {
	mu       sync.Mutex
	closed   bool
	items    int
	bytes    int64
	maxItems int
	maxBytes int64

	consume chan *item
	record  chan *item // nil without a recorder
}

func newQueue(maxItems int, maxBytes int64, record bool) *queue {
	q := &queue{maxItems: maxItems, maxBytes: maxBytes, consume: make(chan *item, maxItems)}
	if record {
		q.record = make(chan *item, maxItems)
	}
	return q
}

// admit hands it to every stage, or refuses with ErrOverloaded / ErrShuttingDown.
func (q *queue) admit(it *item) error {
	n := int64(len(it.body))
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return ErrShuttingDown
	}
	if q.items >= q.maxItems {
		return fmt.Errorf("%w: ingest queue full (%d requests waiting for the consumer)", ErrOverloaded, q.items)
	}
	// An empty queue takes any request the size limit let through, so MaxQueueBytes below
	// MaxRequestBytes cannot refuse a request forever.
	if q.items > 0 && q.bytes+n > q.maxBytes {
		return fmt.Errorf("%w: ingest queue holds %d bytes, limit %d", ErrOverloaded, q.bytes, q.maxBytes)
	}
	q.items++
	q.bytes += n
	if q.record != nil {
		it.refs.Store(2)
		q.consume <- it
		q.record <- it
	} else {
		it.refs.Store(1)
		q.consume <- it
	}
	return nil
}

// done is called by each stage when it no longer needs it.
func (q *queue) done(it *item) {
	if it.refs.Add(-1) != 0 {
		return
	}
	q.mu.Lock()
	q.items--
	q.bytes -= int64(len(it.body))
	q.mu.Unlock()
}

// close stops admission; the stages drain what is queued and then see their channel closed.
func (q *queue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	q.closed = true
	close(q.consume)
	if q.record != nil {
		close(q.record)
	}
}

// depth is the number of requests and bytes held now.
func (q *queue) depth() (int, int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.items, q.bytes
}

func (c *Collector) startWorkers() {
	c.workers.Add(1)
	go func() {
		defer c.workers.Done()
		c.consumeLoop()
	}()
	if c.rec != nil {
		c.workers.Add(1)
		go func() {
			defer c.workers.Done()
			c.recordLoop()
		}()
	}
}

// consumeLoop delivers batches in the order they were accepted, from one goroutine, so the
// consumer needs no locking of its own against the collector.
func (c *Collector) consumeLoop() {
	ctx := context.Background()
	for it := range c.queue.consume {
		n := it.batch.Len()
		// The consumer owns the batch from here on (spans.Consumer's contract).
		if err := c.next.ConsumeBatch(ctx, it.batch); err != nil {
			failed := c.metrics.consumerFailed(n)
			// Accepted spans the consumer refused are counted and logged, sparsely.
			if failed&(failed-1) == 0 {
				c.log.Error("consumer refused accepted spans", "spans", n, "failures", failed, "err", err)
			}
		}
		c.queue.done(it)
	}
}

// recordLoop appends each accepted request to the recorder, flushing on an interval so a crash
// loses at most that much, and flushes and closes it once the queue is drained. With RecordSync it
// also makes each request durable before its answer is sent: it writes what is queued at that
// moment, fsyncs once for all of it, and then releases their answers (a group commit).
func (c *Collector) recordLoop() {
	tick := time.NewTicker(c.cfg.RecordFlushInterval)
	defer tick.Stop()
	dirty := false
	for {
		select {
		case it, ok := <-c.queue.record:
			if !ok {
				c.recErr = c.closeRecorder()
				return
			}
			err := c.record(it)
			if it.durable == nil {
				dirty = dirty || err == nil
				continue
			}
			if closed := c.syncGroup(it, err); closed {
				c.recErr = c.closeRecorder()
				return
			}
			dirty = false
		case <-tick.C:
			if dirty {
				if err := c.rec.Flush(); err != nil {
					c.recordFailed(fmt.Errorf("flush recording: %w", err))
				}
				dirty = false
			}
		}
	}
}

// record writes one request and lets go of it.
func (c *Collector) record(it *item) error {
	err := c.rec.WriteRequest(it.body, it.json)
	if err != nil {
		c.recordFailed(fmt.Errorf("record request: %w", err))
	} else {
		c.metrics.recorded.Inc()
	}
	c.queue.done(it)
	c.unhold(it) // its body is in the recorder now, or never will be
	return err
}

// syncGroup writes the requests queued behind first (already written, with outcome err), fsyncs
// once, and gives each its outcome. closed says the queue was closed meanwhile.
func (c *Collector) syncGroup(first *item, err error) (closed bool) {
	group, errs := []*item{first}, []error{err}
	for more := true; more; {
		select {
		case it, ok := <-c.queue.record:
			if !ok {
				closed, more = true, false
				break
			}
			group, errs = append(group, it), append(errs, c.record(it))
		default:
			more = false
		}
	}
	serr := c.rec.(SyncRecorder).Sync()
	if serr != nil {
		serr = fmt.Errorf("sync recording: %w", serr)
		c.recordFailed(serr)
	}
	for i, it := range group {
		if errs[i] == nil {
			errs[i] = serr
		}
		it.durable <- errs[i]
	}
	return closed
}

func (c *Collector) recordFailed(err error) {
	failed := c.metrics.recordFailed()
	if failed&(failed-1) == 0 {
		c.log.Error("recording failed", "failures", failed, "err", err)
	}
}

func (c *Collector) closeRecorder() error {
	if err := c.rec.Flush(); err != nil {
		c.rec.Close()
		return fmt.Errorf("flush recording: %w", err)
	}
	if err := c.rec.Close(); err != nil {
		return fmt.Errorf("close recording: %w", err)
	}
	return nil
}
