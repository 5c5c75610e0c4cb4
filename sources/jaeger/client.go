package jaeger

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stormwatch/stormwatch/internal/origin"
	"github.com/stormwatch/stormwatch/internal/termsafe"
	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/tracefile"
)

// Defaults for the zero values of Config.
const (
	DefaultTimeout          = 15 * time.Second
	DefaultAttempts         = 3
	DefaultBackoff          = 500 * time.Millisecond
	DefaultMaxBackoff       = 5 * time.Second
	DefaultMaxResponseBytes = 64 << 20
	DefaultLimit            = 20
)

// Config says how to reach a Jaeger. Its zero value (with URL set) is usable: no auth, the
// system's CAs, the defaults above.
type Config struct {
	// URL is the query service's base URL, as the UI is reached: http://jaeger:16686 (a path
	// prefix, for a Jaeger behind a proxy, is kept).
	URL string
	// Token is sent as "Authorization: Bearer TOKEN"; Username and Password as basic auth. At
	// most one of the two.
	Token              string
	Username, Password string
	// TLS configures https URLs (a private CA, a client certificate); nil uses the system's.
	TLS *tls.Config
	// Timeout bounds each HTTP request, the response body included.
	Timeout time.Duration
	// Attempts is how many times one request is tried in all when it fails for a reason that
	// may pass (a network error, 429, 502, 503, 504).
	Attempts int
	// Backoff is the pause before the second attempt; each next pause doubles, up to MaxBackoff,
	// and is jittered (a random fraction of it) so many stormwatch instances do not retry in step.
	// A Retry-After from the server is honoured up to MaxBackoff.
	Backoff, MaxBackoff time.Duration
	// MaxResponseBytes bounds one response body.
	MaxResponseBytes int64
	// Decode is passed to the span decoders.
	Decode spans.DecodeOptions
	// API forces one query API; "" tries APIv3 and falls back to APIv1.
	API API

	// Transport replaces the HTTP transport (tests); nil builds one from TLS.
	Transport http.RoundTripper
	// Rand draws the jitter, in [0, 1); nil uses math/rand/v2.
	Rand func() float64
	// Sleep waits between attempts; nil waits on a timer, returning early with ctx's error.
	Sleep func(ctx context.Context, d time.Duration) error
}

// API is the query API a Client uses.
type API string

// The APIs, newest first.
const (
	APIv3 API = "/api/v3/traces"
	APIv1 API = "/api/traces"
)

// Client reads traces from one Jaeger. It is safe for concurrent use.
type Client struct {
	cfg  Config
	base *url.URL
	http *http.Client

	mu  sync.Mutex
	api API // "" until the first search says which API answers
}

// Query selects traces: those of Service (required) with a span in [Start, End), at most Limit of
// them, of Operation when set.
type Query struct {
	Service   string
	Operation string
	Start     time.Time
	End       time.Time
	Limit     int
}

// New checks cfg and builds a client. It does not contact the Jaeger.
func New(cfg Config) (*Client, error) {
	u, err := url.Parse(strings.TrimSpace(cfg.URL))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("jaeger URL %q: want http(s)://host:port of the Jaeger query service (the UI's address)", redactRaw(cfg.URL))
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawQuery, u.Fragment = "", ""
	if u.User != nil {
		// user:password in the URL is basic auth: sent as such, and never part of the URL the
		// client shows (notes, trace links, errors, logs).
		if cfg.Username != "" || cfg.Password != "" {
			return nil, errors.New("jaeger: a user in the URL and basic auth given apart: give one")
		}
		cfg.Username = u.User.Username()
		cfg.Password, _ = u.User.Password()
		u.User = nil
	}
	if cfg.Token != "" && (cfg.Username != "" || cfg.Password != "") {
		return nil, errors.New("jaeger: a bearer token and basic auth together: give one")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = DefaultAttempts
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	if cfg.MaxResponseBytes <= 0 {
		cfg.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	if cfg.Sleep == nil {
		cfg.Sleep = sleep
	}
	tr := cfg.Transport
	if tr == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.TLSClientConfig = cfg.TLS
		tr = t
	}
	if cfg.API != "" && cfg.API != APIv3 && cfg.API != APIv1 {
		return nil, fmt.Errorf("jaeger: unknown API %q", cfg.API)
	}
	c := &Client{cfg: cfg, base: u, api: cfg.API}
	c.http = &http.Client{Transport: tr, CheckRedirect: c.checkRedirect}
	return c, nil
}

// ErrCrossOriginRedirect refuses a redirect that would take the credentials to another place
// (see package origin).
var ErrCrossOriginRedirect = origin.ErrCrossOrigin

// checkRedirect follows a redirect within the Jaeger's origin (scheme, host and port) and refuses
// one that leaves it while credentials are configured, as a permanent error. Without
// credentials a redirect is followed, up to 10.
func (c *Client) checkRedirect(req *http.Request, via []*http.Request) error {
	check := origin.CheckRedirect(func() bool { return c.cfg.Token != "" || c.cfg.Username != "" || c.cfg.Password != "" })
	if err := check(req, via); err != nil {
		if errors.Is(err, origin.ErrCrossOrigin) {
			return &permanent{fmt.Errorf("jaeger: %w (give --jaeger the address it redirects to, if it is trusted)", err)}
		}
		return err
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// URL is the Jaeger's base URL as configured, without a trailing slash.
func (c *Client) URL() string { return c.base.String() }

// TraceURL is the trace's page in the Jaeger UI.
func (c *Client) TraceURL(traceID string) string { return c.URL() + "/trace/" + traceID }

// API is the query API the last search used, "" before the first.
func (c *Client) API() API {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.api
}

// FindTraces returns the traces q selects, one batch per trace, whole: every span Jaeger has of
// each, from every service. found is how many traces the search returned, what q.Limit bounds:
// a trace of the UI's API whose spans name other trace ids is handed on as one batch per id, so
// there may be more batches than that. The OTLP query API is tried first; a Jaeger without it
// (404 or 405 with no Jaeger error in the body) is asked through /api/traces from then on.
func (c *Client) FindTraces(ctx context.Context, q Query) (traces []*spans.Batch, found int, err error) {
	if q.Service == "" {
		return nil, 0, errors.New("jaeger: a search needs a service name")
	}
	if q.Limit <= 0 {
		q.Limit = DefaultLimit
	}
	if q.End.IsZero() {
		q.End = time.Now()
	}
	if q.Start.IsZero() || !q.Start.Before(q.End) {
		return nil, 0, fmt.Errorf("jaeger: search window %s..%s is empty", q.Start.Format(time.RFC3339), q.End.Format(time.RFC3339))
	}
	api := c.API()
	if api == "" || api == APIv3 {
		traces, err := c.findV3(ctx, q)
		if errors.Is(err, errNoAPI) && c.cfg.API == APIv3 {
			return nil, 0, fmt.Errorf("jaeger at %s does not serve %s", c.URL(), APIv3)
		}
		if !errors.Is(err, errNoAPI) {
			if err == nil {
				c.setAPI(APIv3)
			}
			// The OTLP result is spans, not traces: each trace id is one the search returned.
			return traces, len(traces), err
		}
		c.setAPI(APIv1)
	}
	return c.findV1(ctx, q)
}

func (c *Client) setAPI(a API) {
	c.mu.Lock()
	c.api = a
	c.mu.Unlock()
}

// errNoAPI says the Jaeger does not serve the API asked.
var errNoAPI = errors.New("API not served")

func (c *Client) findV3(ctx context.Context, q Query) ([]*spans.Batch, error) {
	v := url.Values{}
	v.Set("query.service_name", q.Service)
	if q.Operation != "" {
		v.Set("query.operation_name", q.Operation)
	}
	v.Set("query.start_time_min", q.Start.UTC().Format(time.RFC3339Nano))
	v.Set("query.start_time_max", q.End.UTC().Format(time.RFC3339Nano))
	// Jaeger reads the limit as the storage's search depth under this name; without it some
	// storages refuse the search.
	v.Set("query.num_traces", strconv.Itoa(q.Limit))
	status, body, err := c.get(ctx, string(APIv3), v)
	if err != nil {
		return nil, err
	}
	var wrap struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			HTTPCode int    `json:"httpCode"`
			Message  string `json:"message"`
		} `json:"error"`
	}
	jsonErr := json.Unmarshal(body, &wrap)
	switch {
	case status == http.StatusOK && jsonErr == nil && len(wrap.Result) > 0:
		b, err := spans.DecodeJSON(wrap.Result, c.cfg.Decode)
		if err != nil {
			return nil, fmt.Errorf("jaeger %s: %w", APIv3, err)
		}
		return spans.ByTrace(b.Spans), nil
	case status == http.StatusNotFound && jsonErr == nil && wrap.Error != nil:
		// Jaeger answers a search that found nothing with 404 and its error body.
		return nil, nil
	case status == http.StatusNotFound || status == http.StatusMethodNotAllowed:
		return nil, errNoAPI
	case jsonErr == nil && wrap.Error != nil:
		return nil, fmt.Errorf("jaeger %s: %d: %s", APIv3, status, termsafe.String(wrap.Error.Message))
	}
	// Say what was wrong with it, not only what it was.
	why := "neither a result nor an error in it"
	if jsonErr != nil {
		why = "not the API's JSON: " + jsonErr.Error()
	}
	return nil, fmt.Errorf("jaeger %s: unexpected answer %d (%s): %s", APIv3, status, why, snippet(body))
}

func (c *Client) findV1(ctx context.Context, q Query) ([]*spans.Batch, int, error) {
	v := url.Values{}
	v.Set("service", q.Service)
	if q.Operation != "" {
		v.Set("operation", q.Operation)
	}
	v.Set("start", strconv.FormatInt(q.Start.UnixMicro(), 10))
	v.Set("end", strconv.FormatInt(q.End.UnixMicro(), 10))
	v.Set("limit", strconv.Itoa(q.Limit))
	status, body, err := c.get(ctx, string(APIv1), v)
	if err != nil {
		return nil, 0, err
	}
	if status != http.StatusOK {
		return nil, 0, fmt.Errorf("jaeger %s: %d: %s", APIv1, status, snippet(body))
	}
	traces, found, err := tracefile.DecodeJaegerJSON(body, c.cfg.Decode)
	if err != nil {
		return nil, 0, fmt.Errorf("jaeger %s: %w", APIv1, err)
	}
	return traces, found, nil
}

// StatusError is an HTTP answer that is neither a result nor worth another try.
type StatusError struct {
	URL    string
	Status int
	Body   string
}

func (e *StatusError) Error() string {
	switch e.Status {
	case http.StatusUnauthorized, http.StatusForbidden:
		return fmt.Sprintf("GET %s: %d %s (check the token or user and password)", e.URL, e.Status, http.StatusText(e.Status))
	}
	return fmt.Sprintf("GET %s: %d %s: %s", e.URL, e.Status, http.StatusText(e.Status), e.Body)
}

// get sends one GET, retrying what may pass, and returns the final status and body. Statuses
// the caller interprets (200, 404, 405, 400, 500) come back as they are; auth failures as a
// StatusError.
func (c *Client) get(ctx context.Context, path string, q url.Values) (int, []byte, error) {
	u := *c.base
	u.Path += path
	u.RawQuery = q.Encode()
	target := u.String()
	var lastErr error
	for attempt := 1; ; attempt++ {
		status, body, retryAfter, err := c.once(ctx, target)
		switch {
		case err == nil && status != http.StatusTooManyRequests && status != http.StatusBadGateway &&
			status != http.StatusServiceUnavailable && status != http.StatusGatewayTimeout:
			if status == http.StatusUnauthorized || status == http.StatusForbidden {
				return 0, nil, &StatusError{URL: redact(u), Status: status, Body: snippet(body)}
			}
			return status, body, nil
		case err != nil:
			if p := (*permanent)(nil); errors.As(err, &p) {
				return 0, nil, p.error
			}
			lastErr = err
		default:
			lastErr = &StatusError{URL: redact(u), Status: status, Body: snippet(body)}
		}
		if ctx.Err() != nil {
			return 0, nil, lastErr
		}
		if attempt >= c.cfg.Attempts {
			if attempt == 1 {
				return 0, nil, lastErr // nothing to count
			}
			return 0, nil, fmt.Errorf("jaeger: %d attempts failed; the last: %w", attempt, lastErr)
		}
		if err := c.cfg.Sleep(ctx, c.pause(attempt, retryAfter)); err != nil {
			return 0, nil, lastErr
		}
	}
}

// pause is the wait before attempt+1: full jitter over an exponential ceiling, or the server's
// Retry-After, never over MaxBackoff.
func (c *Client) pause(attempt int, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 {
		return min(retryAfter, c.cfg.MaxBackoff)
	}
	ceiling := c.cfg.Backoff << min(attempt-1, 20)
	ceiling = min(ceiling, c.cfg.MaxBackoff)
	return time.Duration(c.cfg.Rand() * float64(ceiling))
}

func (c *Client) once(ctx context.Context, target string) (status int, body []byte, retryAfter time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return 0, nil, 0, err
	}
	req.Header.Set("Accept", "application/json")
	switch {
	case c.cfg.Token != "":
		req.Header.Set("Authorization", "Bearer "+c.cfg.Token)
	case c.cfg.Username != "" || c.cfg.Password != "":
		req.SetBasicAuth(c.cfg.Username, c.cfg.Password)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if p := (*permanent)(nil); errors.As(err, &p) {
			return 0, nil, 0, p // a refused redirect: not worth another try
		}
		// net/http words the error with the whole URL, query included: a line of timestamps and
		// parameters that hides the cause. Where and why is what a reader acts on.
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			return 0, nil, 0, fmt.Errorf("jaeger: GET %s at %s: %w", req.URL.Path, req.URL.Host, ue.Err)
		}
		return 0, nil, 0, fmt.Errorf("jaeger: %w", err)
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(io.LimitReader(resp.Body, c.cfg.MaxResponseBytes+1))
	if err != nil {
		return 0, nil, 0, fmt.Errorf("jaeger: read the answer to GET %s: %w", resp.Request.URL.Path, err)
	}
	if int64(len(body)) > c.cfg.MaxResponseBytes {
		// Not worth retrying: the same search gives the same answer. Ask for fewer traces.
		return 0, nil, 0, &permanent{fmt.Errorf("jaeger: the answer to GET %s is over %d bytes: search a shorter window or fewer traces", resp.Request.URL.Path, c.cfg.MaxResponseBytes)}
	}
	if s := resp.Header.Get("Retry-After"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			retryAfter = time.Duration(n) * time.Second
		}
	}
	return resp.StatusCode, body, retryAfter, nil
}

// permanent marks an error that another attempt would repeat.
type permanent struct{ error }

func (p *permanent) Unwrap() error { return p.error }

// redact drops credentials a URL may carry, for messages.
func redact(u url.URL) string { return origin.Redact(u) }

// redactRaw is redact for a URL that may not parse: what looks like user:password@ goes.
func redactRaw(s string) string {
	if u, err := url.Parse(strings.TrimSpace(s)); err == nil {
		return redact(*u)
	}
	if i := strings.Index(s, "://"); i >= 0 {
		if j := strings.LastIndex(s[i+3:], "@"); j >= 0 {
			return s[:i+3] + "REDACTED@" + s[i+3+j+1:]
		}
	}
	return s
}

// snippet is the start of an answer's body for a message: made safe for a terminal, since the
// body is whatever the server (or something posing as it) sent.
func snippet(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) > 200 {
		return termsafe.String(string(b[:200])) + "..."
	}
	return termsafe.String(string(b))
}
