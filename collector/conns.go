package collector

import (
	"net"
	"sync"
	"sync/atomic"
)

// connLimit is a listener that holds at most max connections open at once. Every open connection
// costs memory for as long as it stays open - gRPC's read buffer (grpcReadBufferSize) and HTTP/2
// state, an HTTP server's buffers - whether it sends anything or not, so without a bound idle or
// half-open connections could use memory without end. A connection over the bound is accepted and
// closed at once, and counted: the client sees its connection closed and retries (every OTLP
// exporter does), rather than waiting unanswered in the kernel's queue; a connection that is left
// open takes no slot from the others' retries. max < 0 means no bound.
type connLimit struct {
	net.Listener
	max     int64
	open    atomic.Int64
	refused atomic.Int64
}

func newConnLimit(ln net.Listener, max int) *connLimit {
	return &connLimit{Listener: ln, max: int64(max)}
}

func (l *connLimit) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if n := l.open.Add(1); l.max >= 0 && n > l.max {
			l.open.Add(-1)
			l.refused.Add(1)
			c.Close()
			continue
		}
		return &limitedConn{Conn: c, l: l}, nil
	}
}

// limitedConn gives its slot back when it is closed, once, whoever closes it first.
type limitedConn struct {
	net.Conn
	l    *connLimit
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}
