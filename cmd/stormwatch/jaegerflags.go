package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/stormwatch/stormwatch/sources/jaeger"
	"github.com/stormwatch/stormwatch/spans"
)

// jaegerFlags say which Jaeger to read traces from and how to reach it; `analyze` and the live
// dashboard share them.
type jaegerFlags struct {
	url       string
	service   string
	operation string
	limit     int
	tokenFile string
	user      string
	passFile  string
	caFile    string
	timeout   time.Duration
}

func (f *jaegerFlags) register(fs *pflag.FlagSet, limitDefault int) {
	fs.StringVar(&f.url, "jaeger", "", "read traces from the Jaeger query service at `URL` (the UI's address, e.g. http://jaeger:16686) instead of files (docs/sources.md)")
	fs.StringVar(&f.service, "service", "", "with --jaeger: the service (`NAME`) whose traces to read (required)")
	fs.StringVar(&f.operation, "operation", "", "with --jaeger: only traces with this operation `NAME` of --service")
	fs.IntVar(&f.limit, "limit", limitDefault, "with --jaeger: the most traces one search returns")
	fs.StringVar(&f.tokenFile, "jaeger-token-file", "", "with --jaeger: send the bearer token in `FILE` (Authorization: Bearer ...)")
	fs.StringVar(&f.user, "jaeger-user", "", "with --jaeger: basic auth user `NAME` (the password from --jaeger-password-file)")
	fs.StringVar(&f.passFile, "jaeger-password-file", "", "with --jaeger-user: the basic auth password in `FILE`")
	fs.StringVar(&f.caFile, "jaeger-ca-file", "", "with an https --jaeger: trust the PEM CA certificates in `FILE` (in addition to the system's)")
	fs.DurationVar(&f.timeout, "jaeger-timeout", jaeger.DefaultTimeout, "with --jaeger: the longest (`DURATION`) one request to Jaeger may take")
}

// jaegerQuery is the search the flags ask for over [start, end).
func jaegerQuery(f jaegerFlags, start, end time.Time) jaeger.Query {
	return jaeger.Query{Service: f.service, Operation: f.operation, Start: start, End: end, Limit: f.limit}
}

// client checks the flags and builds the Jaeger client. Secrets come from files, so they never
// show in a process list or a shell history.
func (f *jaegerFlags) client(decode spans.DecodeOptions) (*jaeger.Client, error) {
	var errs []error
	if f.service == "" {
		errs = append(errs, errors.New("--jaeger needs --service NAME: Jaeger searches traces by service"))
	}
	if f.limit <= 0 {
		errs = append(errs, fmt.Errorf("--limit %d: must be positive", f.limit))
	}
	cfg := jaeger.Config{URL: f.url, Timeout: f.timeout, Decode: decode}
	if f.tokenFile != "" {
		tok, err := readToken("--jaeger-token-file", f.tokenFile)
		errs = append(errs, err)
		cfg.Token = tok
	}
	switch {
	case f.user != "" && f.passFile != "":
		b, err := os.ReadFile(f.passFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("--jaeger-password-file: %w", err))
		}
		cfg.Username, cfg.Password = f.user, strings.TrimRight(string(b), "\r\n")
	case f.user != "" || f.passFile != "":
		errs = append(errs, errors.New("--jaeger-user and --jaeger-password-file go together"))
	}
	if f.caFile != "" {
		pem, err := os.ReadFile(f.caFile)
		pool, perr := x509.SystemCertPool()
		if perr != nil {
			pool = x509.NewCertPool()
		}
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("--jaeger-ca-file: %w", err))
		case !pool.AppendCertsFromPEM(pem):
			errs = append(errs, fmt.Errorf("--jaeger-ca-file %s: no PEM certificate in it", f.caFile))
		}
		cfg.TLS = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return jaeger.New(cfg)
}
