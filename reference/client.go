package reference

import (
	"context"
	"net/http"
)

// Client is a thin http.Client over a [Transport]: Do takes the context explicitly. Redirects and
// cookies behave as in net/http; each redirect hop is its own logical call.
type Client struct {
	t  *Transport
	hc *http.Client
}

// NewClient builds a Transport from cfg and opts and a Client over it.
func NewClient(cfg Config, opts ...Option) (*Client, error) {
	t, err := New(cfg, opts...)
	if err != nil {
		return nil, err
	}
	return &Client{t: t, hc: &http.Client{Transport: t}}, nil
}

// Do sends req as one logical call bounded by ctx and the configured Timeout.
func (c *Client) Do(ctx context.Context, req *http.Request) (*http.Response, error) {
	return c.hc.Do(req.WithContext(ctx))
}

// Transport returns the client's transport (for its Stats and Config).
func (c *Client) Transport() *Transport { return c.t }

// HTTPClient returns the underlying *http.Client.
func (c *Client) HTTPClient() *http.Client { return c.hc }
