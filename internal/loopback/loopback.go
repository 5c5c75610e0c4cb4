package loopback

import (
	"net/netip"
	"strings"
)

// Is reports whether s names this machine: "localhost" (in any case), an IPv4 address in
// 127.0.0.0/8, or the IPv6 loopback address (any spelling of ::1, or 127.0.0.0/8 mapped into IPv6),
// bracketed or not, with or without a port. Only an address written as an address counts: "127.1"
// or "127.0.0.01" is a name to the resolver (which may find it anywhere), so it is not loopback,
// and neither is an empty host ("" or ":4317", every interface).
func Is(s string) bool {
	host := hostOf(s)
	if strings.EqualFold(host, "localhost") {
		return true
	}
	// A loopback address is written 127.x.x.x or has a colon (IPv6): any other host is a name,
	// answered without the parse, whose error for a name is an allocation - and the analyzer asks
	// for every host it names.
	if !strings.HasPrefix(host, "127.") && !strings.Contains(host, ":") {
		return false
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// hostOf is s without its port and brackets: "[::1]:4317" and "[::1]" are "::1", "localhost:80"
// is "localhost". An unbracketed IPv6 address (more than one colon) is a host without a port.
func hostOf(s string) string {
	if strings.HasPrefix(s, "[") {
		if i := strings.IndexByte(s, ']'); i >= 0 {
			return s[1:i]
		}
		return s
	}
	if i := strings.IndexByte(s, ':'); i >= 0 && strings.LastIndexByte(s, ':') == i {
		return s[:i]
	}
	return s
}
