package analyzer

import (
	"strconv"
	"strings"

	"github.com/stormwatch/stormwatch/internal/loopback"
)

// EphemeralPortMin is the lowest port read as ephemeral: Linux hands out 32768-60999 to
// connections and to Docker's published ports, macOS and Windows 49152-65535. A callee listening
// there was given whatever port was free (a test container, httptest, a laptop), so the port says
// nothing that survives a restart.
const EphemeralPortMin = 32768

// HostDependency is origin (scheme://host:port) named by its host, keeping the port only on a
// loopback host and only when it is fixed (docs/analyzer.md, "What a dependency is called"): the
// name of a dependency known by its address alone. origin may be a pattern
// ("http://10.0.0.*:8080" is "10.0.0.*"). The result is a substring of origin.
func HostDependency(origin string) string {
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
	if port == "" || port == defaultPort(scheme) || !loopback.Is(host) {
		return host
	}
	if n, err := strconv.Atoi(port); err != nil || n <= 0 || n >= EphemeralPortMin {
		return host
	}
	return hp
}

// defaultPort is the port a URL of scheme means when it states none.
func defaultPort(scheme string) string {
	switch scheme {
	case "https", "grpcs", "grpc":
		return "443"
	}
	return "80"
}
