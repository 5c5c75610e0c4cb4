package reference

import (
	"context"
	"net/http"
	"sync"
)

// Client is a thin http.Client over a [Transport]: Do takes the context explicitly. Redirects and
// cookies behave as in net/http, and the whole Do - every redirect hop with its attempts - fits in
// one Config.Timeout. It is safe for concurrent use.
//
// The zero value is ready to use, over a zero [Transport] (its defaults); NewClient chooses the
// configuration and options.
type Client struct {
	// defaults fills in a zero Client on first use; NewClient leaves nothing for it to do.
	defaults sync.Once
	t        *Transport
	hc       *http.Client
}

// init makes a zero Client usable, once.
func (c *Client) init() {
	c.defaults.Do(func() {
		if c.t == nil {
			c.t = &Transport{}
			c.hc = &http.Client{Transport: c.t}
		}
	})
}

// NewClient builds a Transport from cfg and opts and a Client over it.
func NewClient(cfg Config, opts ...Option) (*Client, error) {
	t, err := New(cfg, opts...)
	if err != nil {
		return nil, err
	}
	return &Client{t: t, hc: &http.Client{Transport: t}}, nil
}

// Do sends req as one logical call bounded by ctx and the configured Timeout. The caller closes
// the response body, which also releases the call's deadline.
func (c *Client) Do(ctx context.Context, req *http.Request) (*http.Response, error) {
	c.init()
	c.t.init()
	deadline := c.t.clock.Now().Add(c.t.cfg.Timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	ctx, cancel := withDeadline(ctx, c.t.clock, deadline)
	resp, err := c.hc.Do(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// Transport returns the client's transport (for its Stats and Config).
func (c *Client) Transport() *Transport {
	c.init()
	return c.t
}

// HTTPClient returns the underlying *http.Client; calls made with it directly get one Timeout per
// redirect hop rather than one for the whole Do.
func (c *Client) HTTPClient() *http.Client {
	c.init()
	return c.hc
}
