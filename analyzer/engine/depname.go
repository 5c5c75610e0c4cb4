package engine

import "github.com/stormwatch/stormwatch/analyzer"

// The one name a dependency goes by in the report, the findings and the metrics' labels.

// dependencyName is the name a call's dependency goes by in every figure, finding, label and
// comparison: what survives a restart of the callee. In order: the callee's service.name (from
// its SERVER span, or another call to the same origin in the trace) or the caller's own word for it
// (an Envoy upstream_cluster, peer.service) - service; the RPC service (rpcService); else the
// origin's host without its port (analyzer.HostDependency). A host's name (a DNS name,
// "inventory.prod.svc") is what its callers are configured with, and usually its service.name too, while its port moves with the
// run (a test container's published port, httptest's). The port is kept only on a loopback host
// (localhost, 127.0.0.0/8, ::1) and only when it is fixed (below analyzer.EphemeralPortMin, not the
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
	return analyzer.HostDependency(origin)
}

// hostNames is dependencyName for the calls of one trace, one after the other: it keeps the
// name of the last origin it named by its host, since a trace's calls go to few origins, mostly
// in runs, and naming one by its host parses it and asks whether the host is a loopback address.
// host is origin's analyzer.HostDependency when the caller has it already (the interner's cache
// keeps it with the origin, see derivedEntry.host), else "".
type hostNames struct{ origin, name string }

func (h *hostNames) dependencyName(service, rpcService, origin, host string) string {
	if service != "" || rpcService != "" {
		return dependencyName(service, rpcService, origin)
	}
	if host != "" {
		return host
	}
	if origin != h.origin {
		h.origin, h.name = origin, analyzer.HostDependency(origin)
	}
	return h.name
}
