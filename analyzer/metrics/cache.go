package metrics

import (
	"sync"
	"time"

	"github.com/stormwatch/stormwatch/analyzer/engine"
)

// Source hands out analyzer summaries (snapshots without their operations, which nothing here
// reads); *engine.Engine implements it.
type Source interface {
	Summary(now time.Time) *engine.Snapshot
}

// DefaultMaxAge is how old a cached snapshot may be before the next reader takes a new one.
const DefaultMaxAge = time.Second

// Cache rate-limits snapshots: Latest returns the snapshot taken last while it is younger than
// maxAge, and takes a new one otherwise. A snapshot after a change holds the analyzer's lock for
// the time it takes to build the report (milliseconds with 100k operations held), so a scrape
// storm, or several readers, must not each take their own.
type Cache struct {
	src    Source
	maxAge time.Duration
	now    func() time.Time

	mu   sync.Mutex
	last *engine.Snapshot
	at   time.Time
}

// NewCache caches src's snapshots for maxAge (0 means DefaultMaxAge; negative means never cache,
// for tests). now is the clock; nil means time.Now.
func NewCache(src Source, maxAge time.Duration, now func() time.Time) *Cache {
	if maxAge == 0 {
		maxAge = DefaultMaxAge
	}
	if now == nil {
		now = time.Now
	}
	return &Cache{src: src, maxAge: maxAge, now: now}
}

// Latest is the cached snapshot, or a new one when the cached one is older than maxAge. Readers
// that arrive while a snapshot is being taken wait for it and share it. The same pointer is
// returned until a new snapshot is taken, so readers can tell "nothing new" by identity.
func (c *Cache) Latest() *engine.Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if c.last == nil || c.maxAge < 0 || now.Sub(c.at) >= c.maxAge || now.Before(c.at) {
		c.last, c.at = c.src.Summary(now), now
	}
	return c.last
}

// Fresh takes a snapshot now, whatever the age of the cached one, and caches it: for the final
// report at shutdown, which must include the last traces analyzed.
func (c *Cache) Fresh() *engine.Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	c.last, c.at = c.src.Summary(now), now
	return c.last
}
