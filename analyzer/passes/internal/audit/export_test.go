package audit

import "github.com/stormwatch/stormwatch/spans"

// Route is the route Classes reads for an operation whose caller span is id.
func (c *Classes) Route(id spans.SpanID) string { return c.route(id) }
