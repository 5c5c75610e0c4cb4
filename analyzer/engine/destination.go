package engine

import (
	"strings"

	"github.com/stormwatch/stormwatch/spans"
)

// Where a call went and what it asked: its origin (scheme://host:port, the replica-independent
// address the report counts calls per) and its target (method and path, or the RPC method), read
// from whichever semantic-convention generation the span's instrumentation wrote. No url.URL is
// made: these run for every call of every trace (the interner caches them, intern.go).

// originOf finds scheme://host:port of a CLIENT span.
func originOf(s *spans.Span) string {
	k := knownOf(s)
	return k.origin()
}

// origin is originOf of the indexed span.
func (k *known) origin() string {
	if u := k.str(wkURLFull); u != "" {
		if o := originOfURL(u); o != "" {
			return o
		}
	}
	if u := k.str(wkLegacyHTTPURL); u != "" {
		if o := originOfURL(u); o != "" {
			return o
		}
	}
	isRPC := k.str(wkRPCSystem) != "" || k.str(wkRPCMethod) != ""
	scheme := k.str(wkURLScheme)
	if scheme == "" {
		scheme = "http"
		if isRPC {
			scheme = "grpc"
		}
	}
	host, port := k.str(wkServerAddress), k.str(wkServerPort)
	if host == "" {
		host, port = k.str(wkLegacyNetPeerName), k.str(wkLegacyNetPeerPort)
	}
	if host == "" {
		host, port = k.str(wkNetworkPeerAddress), k.str(wkNetworkPeerPort)
	}
	if host != "" {
		if port == "" {
			port = defaultPort(scheme)
		}
		return scheme + "://" + joinHostPort(host, port)
	}
	if svc := k.str(wkRPCService); svc != "" {
		return "grpc://" + svc
	}
	return ""
}

func joinHostPort(host, port string) string {
	if strings.IndexByte(host, ':') >= 0 && !strings.HasPrefix(host, "[") {
		return "[" + host + "]:" + port
	}
	return host + ":" + port
}

func defaultPort(scheme string) string {
	switch scheme {
	case "https", "grpcs":
		return "443"
	case "grpc":
		return "443"
	}
	return "80"
}

// originOfURL cuts scheme://host:port out of an absolute URL without allocating a url.URL.
func originOfURL(u string) string {
	i := schemeEnd(u)
	if i <= 0 {
		return ""
	}
	scheme := strings.ToLower(u[:i])
	rest := u[i+3:]
	if j := indexEndOfAuthority(rest); j >= 0 {
		rest = rest[:j]
	}
	rest = hostOfAuthority(rest)
	if rest == "" {
		return ""
	}
	hasPort := false
	if strings.HasPrefix(rest, "[") {
		hasPort = strings.Contains(rest, "]:")
	} else {
		hasPort = strings.IndexByte(rest, ':') >= 0
	}
	if !hasPort {
		rest += ":" + defaultPort(scheme)
	}
	return scheme + "://" + strings.ToLower(rest)
}

// hostOfAuthority is an authority without its userinfo ("user:pw@host:port" -> "host:port"). Most
// have none: one strings.IndexByte says so, where strings.LastIndexByte reads a byte at a time.
func hostOfAuthority(auth string) string {
	if strings.IndexByte(auth, '@') < 0 {
		return auth
	}
	return auth[strings.LastIndexByte(auth, '@')+1:]
}

// pathOfURL is the path of an absolute URL without query or fragment.
func pathOfURL(u string) string {
	return pathOfURLAt(u, schemeEnd(u))
}

// schemeEnd is the index of u's first "://" (-1: none): strings.Index's answer, told by two
// compares for the URLs nearly every call has ("http://", "https://"), where the search costs
// a call and a scan, on every URL of every call.
func schemeEnd(u string) int {
	if len(u) > 8 && u[4] == ':' && u[:4] == "http" && u[5:7] == "//" {
		return 4
	}
	if len(u) > 9 && u[5] == ':' && u[:5] == "https" && u[6:8] == "//" {
		return 5
	}
	return strings.Index(u, "://")
}

// pathOfURLAt is pathOfURL, given the index of u's first "://" (-1: none).
func pathOfURLAt(u string, i int) string {
	if i >= 0 {
		u = u[i+3:]
		j := strings.IndexByte(u, '/')
		if j < 0 {
			return "/"
		}
		u = u[j:]
	}
	if j := indexEndOfPath(u); j >= 0 {
		u = u[:j]
	}
	return u
}

// targetOf is what a call asked for, independent of which replica it went to: method and path for
// HTTP, the full method for RPC. Span names are not used: they differ by language and protocol.
func targetOf(s *spans.Span) string {
	k := knownOf(s)
	return k.target()
}

// target is targetOf of the indexed span.
func (k *known) target() string {
	if m := k.str(wkRPCMethod); m != "" {
		if svc := k.str(wkRPCService); svc != "" && !strings.Contains(m, "/") {
			return svc + "/" + m
		}
		return m
	}
	method := k.str(wkHTTPMethod)
	if method == "" {
		method = k.str(wkLegacyHTTPMethod)
	}
	path := ""
	if u := k.str(wkURLFull); u != "" {
		path = pathOfURL(u)
	} else if p := k.str(wkURLPath); p != "" {
		path = p
	} else if u := k.str(wkLegacyHTTPURL); u != "" {
		path = pathOfURL(u)
	} else if u := k.str(wkLegacyHTTPTarget); u != "" {
		path = pathOfURL(u)
	} else if r := k.str(wkHTTPRoute); r != "" {
		path = r
	}
	if method == "" && path == "" {
		return ""
	}
	return strings.TrimSpace(method + " " + path)
}

// indexEndOfAuthority is strings.IndexAny(s, "/?#"), and indexEndOfPath strings.IndexAny(s, "?#"),
// without building a character set on every call (they run for every URL of every call). Each
// cut is a strings.IndexByte per character, which reads many bytes at a time, in the part of s
// left by the cut before it: about half the time of a loop reading a byte at a time, on URLs
// of a hundred bytes.
func indexEndOfAuthority(s string) int {
	j := strings.IndexByte(s, '/')
	if j >= 0 {
		s = s[:j]
	}
	if q := indexEndOfPath(s); q >= 0 {
		return q
	}
	return j
}

func indexEndOfPath(s string) int {
	q := strings.IndexByte(s, '?')
	if q >= 0 {
		s = s[:q]
	}
	if h := strings.IndexByte(s, '#'); h >= 0 {
		return h
	}
	return q
}
