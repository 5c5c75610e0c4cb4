// Package collectortest holds test helpers for the collector and the commands that run it: a
// throwaway TLS certificate for 127.0.0.1, in memory or as the PEM files the --tls-cert and
// --tls-key flags read, and an OTLP/gRPC export written by hand (RawGRPC) for what a stock client
// cannot send.
package collectortest
