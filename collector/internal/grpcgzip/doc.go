// Package grpcgzip holds one test that needs a test binary of its own: it proves that the
// collector itself makes OTLP/gRPC accept gzip-compressed requests.
//
// grpc-go decompresses only with compressors registered in the process, and registering is a side
// effect of importing google.golang.org/grpc/encoding/gzip. The collector's other tests import the
// OpenTelemetry SDK's gRPC exporter, which registers gzip too, so there a missing registration in
// the collector would go unnoticed. This package imports nothing that registers it, and its test
// writes the compressed gRPC request by hand over HTTP/2, so no client-side compressor is involved.
package grpcgzip
