package engine

import (
	"strconv"
	"strings"
)

// ephemeralPortMin is the lowest port read as ephemeral: Linux hands out 32768-60999 to
// connections and to Docker's published ports, macOS and Windows 49152-65535. A callee listening
// there was given whatever port was free (a test container, httptest, a laptop), so the port says
// nothing that survives a restart.
const ephemeralPortMin = 32768

// dependencyName is the name a call's dependency goes by in every figure, finding, label and
// comparison: what survives a restart of the callee. In order: the callee's service.name (from
// its SERVER span, or another call to the same origin in the trace) or the caller's own word for it
// (an Envoy upstream_cluster, peer.service) - service; the RPC service (rpcService); else the
// origin's host without its port. A host's name (a DNS name, "inventory.prod.svc") is what its
// callers are configured with, and usually its service.name too, while its port moves with the
// run (a test container's published port, httptest's). The port is kept only on a loopback host
// (localhost, 127.0.0.0/8, ::1) and only when it is fixed (below ephemeralPortMin, not the
// scheme's default): there one host is shared by unrelated services, "localhost:8080" and
// "localhost:9090" stay two dependencies while "localhost:41234" and "localhost:51234" are one,
// "localhost". Origins with no host ("unknown:GET") are their own name. The result is a substring
// of one of its arguments: nothing is allocated per call.
func dependencyName(service, rpcService, origin string) string {
	if service != "" {
		return service
	}
	if rpcService != "" {
		return rpcService
	}
	return hostDependency(origin)
}

// hostDependency is origin (scheme://host:port) named by its host, keeping the port only on a
// loopback host and only when it is fixed (see dependencyName).
func hostDependency(origin string) string {
	i := strings.Index(origin, "://")
	if i < 0 {
		return origin
	}
	scheme, hp := origin[:i], origin[i+3:]
	host, port := hp, ""
	if strings.HasPrefix(hp, "[") {
		if j := strings.Index(hp, "]:"); j >= 0 {
			host, port = hp[:j+1], hp[j+2:]
		}
	} else if j := strings.IndexByte(hp, ':'); j >= 0 && strings.LastIndexByte(hp, ':') == j {
		host, port = hp[:j], hp[j+1:]
	}
	if host == "" {
		return hp
	}
	if port == "" || port == defaultPort(scheme) || !loopback(host) {
		return host
	}
	if n, err := strconv.Atoi(port); err != nil || n <= 0 || n >= ephemeralPortMin {
		return host
	}
	return hp
}

// loopback reports whether host names this machine: "localhost", an IPv4 address in 127.0.0.0/8,
// or "[::1]".
func loopback(host string) bool {
	return host == "localhost" || strings.HasPrefix(host, "127.") || host == "[::1]"
}
