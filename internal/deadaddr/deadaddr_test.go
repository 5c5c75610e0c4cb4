package deadaddr_test

import (
	"errors"
	"net"
	"syscall"
	"testing"

	"github.com/stormwatch/stormwatch/internal/deadaddr"
)

// The address refuses connections, and a listener cannot take its port while the test runs.
func TestLoopbackRefusesAndStaysReserved(t *testing.T) {
	addr := deadaddr.Loopback(t)
	if _, err := net.Dial("tcp", addr); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial %s: %v, want connection refused", addr, err)
	}
	if l, err := net.Listen("tcp", addr); err == nil {
		l.Close()
		t.Fatalf("a listener took %s while it was held", addr)
	}
	// Many listeners asking for any port are never given it.
	for range 200 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		got := l.Addr().String()
		l.Close()
		if got == addr {
			t.Fatalf("port 0 was given the held %s", addr)
		}
	}
}
