package loopback

import "testing"

// Every form an address of this machine is written in by the callers - a listen address
// (host:port), a host alone, a URL's bracketed host, an Envoy upstream_address, a policy's
// origin pattern - and the look-alikes that are not loopback.
func TestIs(t *testing.T) {
	for _, c := range []struct {
		s    string
		want bool
	}{
		// Names.
		{"localhost", true},
		{"localhost:8080", true},
		{"LocalHost:4317", true},
		{"localhost.example.com", false},
		{"mylocalhost:80", false},
		// IPv4: all of 127.0.0.0/8, with or without a port, written as an address. Shorthands and
		// patterns are names to the resolver (it may look them up in DNS): not loopback.
		{"127.0.0.1", true},
		{"127.0.0.1:4317", true},
		{"127.0.0.6:15006", true}, // Istio's inbound passthrough source
		{"127.255.255.254:1", true},
		{"127.0.0.*", false},
		{"127.0.0.*:8080", false},
		{"127.1", false},
		{"127.0.0.01", false},
		{"127.0.0.1.5", false},
		{"127.999.999.999:80", false},
		{"127...:4317", false},
		{"127.example.com:80", false},
		{"127.0.0.1.nip.io", false},
		{"128.0.0.1:80", false},
		{"10.0.0.5:1", false},
		{"0.0.0.0:4317", false},
		// IPv6: bracketed or not, with a port or not, any spelling of ::1, IPv4-mapped loopback.
		{"::1", true},
		{"[::1]", true},
		{"[::1]:4317", true},
		{"0:0:0:0:0:0:0:1", true},
		{"[::ffff:127.0.0.1]:80", true},
		{"::2", false},
		{"[::]:4317", false},
		{"[fe80::1]:80", false},
		// Every interface, or nothing: not loopback.
		{"", false},
		{":4317", false},
		{"[", false},
		{"[::1", false},
	} {
		if got := Is(c.s); got != c.want {
			t.Errorf("Is(%q) = %v, want %v", c.s, got, c.want)
		}
	}
}

// The analyzer asks for every host it names: a name is answered without allocating.
func TestIsAllocatesNothingForANameOrAnAddress(t *testing.T) {
	for _, s := range []string{"inventory.shop.svc.cluster.local:8080", "payments", "10.0.0.5:1", "127.0.0.1:4317", "[::1]:4317"} {
		if n := testing.AllocsPerRun(100, func() { Is(s) }); n != 0 {
			t.Errorf("Is(%q): %v allocations, want none", s, n)
		}
	}
}
