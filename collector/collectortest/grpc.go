package collectortest

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net/http"
	"testing"
	"time"
)

// RawGRPC sends one OTLP/gRPC trace export written by hand to the collector at addr: payload in a
// length-prefixed message flagged compressed or not, under grpc-encoding encoding ("" for none),
// over HTTP/2 without TLS. It returns the answer's grpc-status and grpc-message. A stock client
// cannot send a body that claims gzip and is not, nor one compressed without registering a
// compressor in the process.
func RawGRPC(t testing.TB, addr string, compressed bool, encoding string, payload []byte) (code, msg string) {
	t.Helper()
	frame := make([]byte, 5, 5+len(payload))
	if compressed {
		frame[0] = 1
	}
	binary.BigEndian.PutUint32(frame[1:], uint32(len(payload)))
	frame = append(frame, payload...)
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true) // gRPC without TLS: HTTP/2 with prior knowledge
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost,
		"http://"+addr+"/opentelemetry.proto.collector.trace.v1.TraceService/Export", bytes.NewReader(frame))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("TE", "trailers")
	if encoding != "" {
		req.Header.Set("grpc-encoding", encoding)
		req.Header.Set("grpc-accept-encoding", encoding)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil { // trailers arrive after the body
		t.Fatal(err)
	}
	code, msg = resp.Trailer.Get("grpc-status"), resp.Trailer.Get("grpc-message")
	if code == "" { // a trailers-only answer
		code, msg = resp.Header.Get("grpc-status"), resp.Header.Get("grpc-message")
	}
	return code, msg
}
