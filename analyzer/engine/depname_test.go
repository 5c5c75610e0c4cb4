package engine

import "testing"

// The name a dependency goes by: what survives a restart of the callee.
func TestDependencyName(t *testing.T) {
	cases := []struct{ service, rpc, origin, want string }{
		{"inventory", "inv.v1.Inventory", "http://10.0.0.7:8080", "inventory"}, // service.name first
		{"", "inv.v1.Inventory", "grpc://10.0.0.7:9090", "inv.v1.Inventory"},   // then rpc.service
		{"", "", "http://inventory:8080", "inventory"},                         // then the host, port dropped
		{"", "", "http://inventory.prod.svc:41234", "inventory.prod.svc"},
		{"", "", "http://10.0.0.7:8080", "10.0.0.7"},
		{"", "", "http://localhost:8080", "localhost:8080"}, // a fixed port on loopback: kept
		{"", "", "http://localhost:9090", "localhost:9090"},
		{"", "", "http://localhost:41234", "localhost"}, // ephemeral: dropped
		{"", "", "http://127.0.0.1:51234", "127.0.0.1"},
		{"", "", "http://localhost:80", "localhost"}, // the scheme's default
		{"", "", "https://127.0.0.1:443", "127.0.0.1"},
		{"", "", "http://[::1]:8080", "[::1]:8080"},
		{"", "", "http://[::1]:45000", "[::1]"},
		{"", "", "http://[0:0:0:0:0:0:0:1]:8080", "[0:0:0:0:0:0:0:1]:8080"}, // loopback as the collector reads it
		{"", "", "http://127.0.0.1.nip.io:8080", "127.0.0.1.nip.io"},        // a name, not an address
		{"", "", "http://[fd00::7]:8080", "[fd00::7]"},
		{"", "", "grpc://inv.v1.Inventory", "inv.v1.Inventory"}, // an origin made of the RPC service
		{"", "", "unknown:GET", "unknown:GET"},
		{"", "", "", ""},
	}
	for _, c := range cases {
		if got := dependencyName(c.service, c.rpc, c.origin); got != c.want {
			t.Errorf("dependencyName(%q, %q, %q) = %q, want %q", c.service, c.rpc, c.origin, got, c.want)
		}
	}
	// The calls of one trace, named one after the other: every origin after a different one, or
	// after itself, in both orders, gets its own name, never the last one's.
	var h hostNames
	for _, order := range [][]int{{0, 0, 1, 2}, {2, 1, 1, 0}} {
		for i := range cases {
			for _, o := range order {
				c := cases[(i+o)%len(cases)]
				if got := h.dependencyName(c.service, c.rpc, c.origin, ""); got != c.want {
					t.Errorf("hostNames.dependencyName(%q, %q, %q) = %q, want %q", c.service, c.rpc, c.origin, got, c.want)
				}
			}
		}
	}
}
