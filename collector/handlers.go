package collector

import (
	"net/http"
)

// extraHandler is a route served beside /v1/traces and /metrics (see WithHTTPHandler).
type extraHandler struct {
	pattern   string
	h         http.Handler
	protected bool
}

// WithHTTPHandler serves h at pattern (a net/http ServeMux pattern such as "GET /api/v1/report")
// on the OTLP/HTTP port, so downstream parts (the analysis API) need no listener of their own.
// When protected is true and a token is configured (Config.Token), a request must carry it as an
// export must: without it the answer is 401 with an OTLP Status in JSON, and h is not called.
// The collector does not know what h serves; it only guards and routes it.
func WithHTTPHandler(pattern string, h http.Handler, protected bool) Option {
	return func(c *Collector) {
		c.handlers = append(c.handlers, extraHandler{pattern: pattern, h: h, protected: protected})
	}
}

// mountHandlers adds the WithHTTPHandler routes to mux.
func (c *Collector) mountHandlers(mux *http.ServeMux) {
	for _, x := range c.handlers {
		h := x.h
		if x.protected {
			h = c.requireToken(h)
		}
		mux.Handle(x.pattern, h)
	}
}

// requireToken answers 401 to a request without the configured bearer token; the token is
// compared in constant time, as for exports, and never echoed.
func (c *Collector) requireToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := c.authorize(r.Header.Get("Authorization")); err != nil {
			writeHTTPError(w, err, encJSON, c.cfg.RetryAfter)
			return
		}
		next.ServeHTTP(w, r)
	})
}
