package collector

import (
	"fmt"
	"strings"
	"time"

	"github.com/stormwatch/stormwatch/internal/words"
)

// Stats is a point-in-time view of the collector's counters, for status lines and dashboards.
type Stats struct {
	Requests         int64 // export requests answered
	RefusedRequests  int64 // requests answered with an error
	AcceptedSpans    int64 // spans accepted into the queue
	RejectedSpans    int64 // spans not kept: invalid, refused with their request, or refused by the consumer
	QueueDepth       int   // requests waiting for the consumer or recorder
	QueueBytes       int64
	QueueCapacity    int
	RecordErrors     int64
	ConsumerFailures int64
	// IgnoredMetricsRequests and IgnoredLogsRequests count export requests of the signals that are
	// received and dropped (signals.go).
	IgnoredMetricsRequests int64
	IgnoredLogsRequests    int64
	// Held is the span holder's report; HasHeld is false when no holder reports (see WithHeldStats).
	Held    HeldStats
	HasHeld bool
}

// Stats returns the current counters.
func (c *Collector) Stats() Stats {
	m := c.metrics
	depth, bytes := c.queue.depth()
	s := Stats{
		Requests:         m.totalRequests.Load(),
		RefusedRequests:  m.totalRefusedReqs.Load(),
		AcceptedSpans:    m.totalAccepted.Load(),
		RejectedSpans:    m.totalRejected.Load(),
		QueueDepth:       depth,
		QueueBytes:       bytes,
		QueueCapacity:    c.cfg.QueueSize,
		RecordErrors:     m.totalRecordErr.Load(),
		ConsumerFailures: m.totalConsumerErr.Load(),
	}
	c.ignored.stats(&s)
	if c.held != nil {
		s.Held, s.HasHeld = c.held(), true
	}
	return s
}

// StatusLine renders the headless one-line status from two snapshots taken elapsed apart:
//
//	1,250 spans/s · 52,000 spans · 1,180 traces held (12,000 spans) · 3 rejected · 0 evicted · queue 0/64
func StatusLine(prev, cur Stats, elapsed time.Duration) string {
	rate := 0.0
	if elapsed > 0 {
		rate = float64(cur.AcceptedSpans-prev.AcceptedSpans) / elapsed.Seconds()
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s spans/s · %s spans", words.Int(int64(rate+0.5)), words.Int(cur.AcceptedSpans))
	if cur.HasHeld {
		fmt.Fprintf(&sb, " · %s traces held (%s spans)", words.Int(cur.Held.Traces), words.Int(cur.Held.Spans))
	}
	fmt.Fprintf(&sb, " · %s rejected", words.Int(cur.RejectedSpans))
	if cur.HasHeld {
		fmt.Fprintf(&sb, " · %s evicted", words.Int(cur.Held.EvictedSpans))
	}
	fmt.Fprintf(&sb, " · queue %d/%d", cur.QueueDepth, cur.QueueCapacity)
	if n := cur.IgnoredMetricsRequests + cur.IgnoredLogsRequests; n > 0 {
		fmt.Fprintf(&sb, " · %s (%s)", IgnoredSignalsNote, words.Count(int(n), "request"))
	}
	if cur.RecordErrors > 0 {
		fmt.Fprintf(&sb, " · %s RECORD ERRORS", words.Int(cur.RecordErrors))
	}
	return sb.String()
}
