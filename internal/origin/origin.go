// Package origin keeps credentials at the origin they were given for: an HTTP client that sends a
// token or a password follows a redirect only within the scheme, host and port it was pointed at.
// Go's client alone keeps the Authorization header on a redirect to the same host over another
// scheme or port, so an https server redirecting to http would have the token sent in clear.
package origin

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// ErrCrossOrigin refuses a redirect that would take the credentials to another place.
var ErrCrossOrigin = errors.New("refused a redirect to another scheme, host or port: the credentials would go there")

// Same reports whether a and b have one scheme, host and port (the default port spelled out or
// not).
func Same(a, b *url.URL) bool {
	port := func(u *url.URL) string {
		if p := u.Port(); p != "" {
			return p
		}
		if strings.EqualFold(u.Scheme, "https") {
			return "443"
		}
		return "80"
	}
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

// CheckRedirect is an http.Client's CheckRedirect: at most 10 redirects, and, when credentials()
// says the requests carry some, none that leaves the first request's origin. The error wraps
// ErrCrossOrigin and names both places without their user info or query.
func CheckRedirect(credentials func() bool) func(req *http.Request, via []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		if credentials() && !Same(via[0].URL, req.URL) {
			return fmt.Errorf("%s to %s: %w", Redact(*via[0].URL), Redact(*req.URL), ErrCrossOrigin)
		}
		return nil
	}
}

// Redact is u without user info or query, for messages.
func Redact(u url.URL) string {
	u.User = nil
	u.RawQuery = ""
	return u.String()
}
