package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
)

// originPort is the one port every lab origin is addressed by (http://catalog:8080), whatever
// loopback port it really listens on.
const originPort = 8080

// errUnknownOrigin is what dialling a name the lab did not hand out fails with: the lab's clients
// reach its own origins and nothing else, so no request leaves the machine.
var errUnknownOrigin = errors.New("not a lab origin")

// names maps the stable addresses the lab gives its origins ("catalog:8080") to the loopback
// addresses they really listen on ("127.0.0.1:44713"). Recordings, span attributes and the demo's
// dependency list then name an origin as a deployment would, and the same on every run, while the
// listeners keep their random ports (two runs at once never collide).
type names struct {
	mu    sync.Mutex
	addrs map[string]string // "host:8080" -> "127.0.0.1:port"
	used  map[string]int    // host -> how many origins took it
}

func newNames() *names {
	return &names{addrs: map[string]string{}, used: map[string]int{}}
}

// add registers an origin called name (a service, or "service/instance" for a replica) listening
// at real, and returns its stable host:port. The host is the instance's part of the name
// ("catalog/primary-a" is primary-a). A name taken again in the same run (each variant of a
// scenario has its own origins) gets a suffix, dependency-2, so that the variants stay apart in
// recordings and in connection pools.
func (n *names) add(name, real string) string {
	host := hostOf(name)
	n.mu.Lock()
	defer n.mu.Unlock()
	n.used[host]++
	if k := n.used[host]; k > 1 {
		host += "-" + strconv.Itoa(k)
	}
	stable := net.JoinHostPort(host, strconv.Itoa(originPort))
	n.addrs[stable] = real
	return stable
}

// hostOf makes a host name of an origin's name: its instance part, in lower case, with anything a
// host name cannot hold replaced by '-'.
func hostOf(name string) string {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	b := []byte(strings.ToLower(name))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			b[i] = '-'
		}
	}
	if len(b) == 0 {
		return "origin"
	}
	return string(b)
}

// lookup is the real address behind a stable one.
func (n *names) lookup(addr string) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	real, ok := n.addrs[addr]
	return real, ok
}

// dial is the lab transport's DialContext: it dials the listener behind a lab name and refuses any
// other address. Its errors name the lab address, as a resolver-backed dial would ("dial tcp
// refused:8080: connect: connection refused"), never the random port behind it.
func (n *names) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	real, ok := n.lookup(addr)
	if !ok {
		return nil, &net.OpError{Op: "dial", Net: network, Addr: labAddr(addr),
			Err: fmt.Errorf("%w (the lab dials only the origins it started)", errUnknownOrigin)}
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, real)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) {
			named := *op
			named.Addr = labAddr(addr)
			named.Source = nil
			return nil, &named
		}
		return nil, fmt.Errorf("dial %s (%s): %w", addr, real, err)
	}
	return conn, nil
}

// labAddr is a lab name as a net.Addr, for dial errors.
type labAddr string

func (labAddr) Network() string  { return "tcp" }
func (a labAddr) String() string { return string(a) }
