package collector

import (
	"crypto/subtle"
	"fmt"
	"strings"

	"github.com/stormwatch/stormwatch/spans"
)

// transport names the way a request arrived, for metrics.
type transport uint8

const (
	transportGRPC transport = iota
	transportHTTP
	numTransports
)

var transportNames = [numTransports]string{"grpc", "http"}

func (t transport) String() string { return transportNames[t] }

// encoding is the body's wire format.
type encoding uint8

const (
	encUnknown encoding = iota
	encProto
	encJSON
)

func (e encoding) String() string {
	switch e {
	case encProto:
		return "protobuf"
	case encJSON:
		return "JSON"
	}
	return "unknown"
}

// exportResult is what one request did to the spans it carried.
type exportResult struct {
	accepted int // spans admitted to the queue
	rejected int // spans refused, for cause or with the whole request
	// invalid counts spans refused for cause while the rest were kept: the partial success.
	invalid int
	reason  string
}

// authorize checks the bearer token both transports pass in (the Authorization header, or the
// "authorization" gRPC metadata). The comparison is constant-time so the token cannot be guessed
// byte by byte from response timings; the presented value is never logged.
func (c *Collector) authorize(header string) error {
	if c.cfg.Token == "" {
		return nil
	}
	scheme, tok, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		if header == "" {
			return fmt.Errorf("%w: missing bearer token (authorization: Bearer TOKEN)", ErrUnauthenticated)
		}
		return fmt.Errorf("%w: authorization is not a bearer token", ErrUnauthenticated)
	}
	if subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), []byte(c.cfg.Token)) != 1 {
		return fmt.Errorf("%w: wrong bearer token", ErrUnauthenticated)
	}
	return nil
}

// export is the one path both transports take once they hold the request body: decode, then admit
// to the queue. Spans with invalid ids are dropped by the decoder and reported as a partial success
// while the valid ones are kept. body must not be reused by the caller: the batch and the recorder
// keep it. buf, when not nil, is body's buffer from c.bodies: it goes back there once nothing
// needs it, and the batch decoded from it to c.batches (bodies.go).
func (c *Collector) export(body []byte, buf *[]byte, enc encoding) (exportResult, error) {
	b := c.batch()
	var err error
	switch enc {
	case encProto:
		err = spans.DecodeProtoInto(b, body, c.cfg.Decode)
	case encJSON:
		err = spans.DecodeJSONInto(b, body, c.cfg.Decode)
	default:
		c.recycle(buf, b)
		return exportResult{}, fmt.Errorf("%w: body encoding %s", ErrUnsupportedMediaType, enc)
	}
	if err != nil {
		c.recycle(buf, b) // the error messages are copies
		// The decoders mark bad input permanent and say where it was; classify maps that to 400.
		if spans.IsPermanent(err) {
			return exportResult{}, err
		}
		return exportResult{}, fmt.Errorf("%w: decode OTLP/%s request: %v", ErrMalformed, enc, err)
	}
	res := exportResult{rejected: b.Rejected, invalid: b.Rejected, reason: b.RejectReason}
	n := b.Len() // the batch is the consumer's once admitted
	if n == 0 {
		c.recycle(buf, b)
		return res, nil
	}
	it := &item{batch: b, body: body, json: enc == encJSON, buf: buf}
	if c.cfg.RecordSync {
		it.durable = make(chan error, 1)
	}
	c.hold(it)
	if err := c.queue.admit(it); err != nil {
		res.rejected += n
		c.recycle(buf, b) // no stage has them
		return res, err
	}
	res.accepted = n
	if it.durable != nil {
		// The answer waits until the recording has the request on disk. Should that fail, the
		// client hears so (and may retry) although the spans did reach the consumer: a
		// durable recording is what it asked for.
		if err := <-it.durable; err != nil {
			return res, fmt.Errorf("record the request durably (--record-sync): %w", err)
		}
	}
	return res, nil
}

// partialMessage is the OTLP partial-success error_message for res, or "" when nothing was dropped.
func (r exportResult) partialMessage() string {
	if r.invalid == 0 {
		return ""
	}
	reason := r.reason
	if reason == "" {
		reason = "invalid span"
	}
	return fmt.Sprintf("%d spans rejected: %s", r.invalid, reason)
}
