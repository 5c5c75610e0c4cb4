// Command stormwatch is an OTLP collector, retry-storm analyzer and live terminal dashboard in one
// binary. main only wires: each subcommand lives in its own file, the work in the packages.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/stormwatch/stormwatch/internal/termsafe"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// run is main without the process: tests call it with their own arguments and streams.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	root := newRootCmd(stdin, stdout, stderr)
	root.SetArgs(args)
	return root.ExecuteContext(ctx)
}

// exitError carries a specific exit code: analyze exits 1 on findings and 2 on bad input.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}
func (e *exitError) Unwrap() error { return e.err }

// withExitCode wraps err so that the process exits with code; a nil err exits silently with it.
func withExitCode(code int, err error) error { return &exitError{code: code, err: err} }

func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	// An error can carry text from the data (a remote service's answer, a span's name): made
	// safe for the terminal.
	safe := termsafe.NewWriter(stderr)
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(safe, "stormwatch:", ee.err)
		}
		return ee.code
	}
	fmt.Fprintln(safe, "stormwatch:", err)
	return 2
}
