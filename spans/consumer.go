package spans

import (
	"context"
	"errors"
)

// Consumer receives decoded batches. The collector, the file reader and replay produce them; the
// analyzer (and test sinks) consume them. It mirrors the OpenTelemetry Collector's consumer.Traces:
// one method, so a producer never knows who is downstream.
//
// ConsumeBatch must not keep b past its return unless it owns the batch from then on: producers hand
// over ownership and do not reuse a batch they have passed on - until its owner calls
// [Batch.Release], which says it keeps nothing of it.
//
// A batch may carry its spans packed by trace only ([Batch.Packed], Spans empty: the decoders with
// DecodeOptions.PackByTrace, the Collector connector): a consumer that reads span values counts
// them with [Batch.Len] and reads each block back with [UnpackSpans], or is given a producer that
// does not pack.
type Consumer interface {
	ConsumeBatch(ctx context.Context, b *Batch) error
}

// ConsumerFunc adapts a function to [Consumer].
type ConsumerFunc func(ctx context.Context, b *Batch) error

// ConsumeBatch calls f.
func (f ConsumerFunc) ConsumeBatch(ctx context.Context, b *Batch) error { return f(ctx, b) }

// permanentError marks an error that retrying the same data cannot fix.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// NewPermanent marks err as permanent: the data is bad and must not be sent again. Producers map
// permanent errors to 400 / INVALID_ARGUMENT and anything else to a retryable answer.
func NewPermanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err: err}
}

// IsPermanent reports whether err, or an error it wraps, was marked with [NewPermanent].
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}
