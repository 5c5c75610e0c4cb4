package reference

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrBreakerOpen matches every [BreakerOpenError] with errors.Is.
var ErrBreakerOpen = errors.New("circuit breaker open")

// DeadlineError ends a logical call whose budget ran out. errors.Is(err, context.DeadlineExceeded)
// holds for it.
type DeadlineError struct {
	// Budget is the time the call had in all.
	Budget time.Duration
	// Attempts is the number of physical attempts made.
	Attempts int
	// Err is what the last attempt returned.
	Err error
}

func (e *DeadlineError) Error() string {
	return fmt.Sprintf("deadline of %v exceeded after %d attempt(s): %v", e.Budget, e.Attempts, e.Err)
}

// Unwrap exposes context.DeadlineExceeded and the last attempt's error.
func (e *DeadlineError) Unwrap() []error { return []error{context.DeadlineExceeded, e.Err} }

// AttemptError wraps the error of the last attempt of a call that did not end by its deadline.
type AttemptError struct {
	Method, URL string
	Attempts    int
	StopReason  string
	Err         error
}

func (e *AttemptError) Error() string {
	return fmt.Sprintf("%s %s: %d attempt(s), stopped (%s): %v", e.Method, e.URL, e.Attempts, e.StopReason, e.Err)
}

func (e *AttemptError) Unwrap() error { return e.Err }
