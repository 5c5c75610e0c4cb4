// Command otelcol-stormwatch is an OpenTelemetry Collector distribution with the stormwatch
// connector: the same components as builder-config.yaml, built with plain `go build` so that
// neither the tests nor a user need the collector builder.
//
//	go build ./cmd/otelcol-stormwatch && ./otelcol-stormwatch --config backend.yaml
package main

import (
	"fmt"
	"os"

	"github.com/stormwatch/stormwatch/otelcol/distribution"
)

// version is set with -ldflags "-X main.version=..." by release builds.
var version = "devel"

func main() {
	if err := distribution.NewCommand(version).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "otelcol-stormwatch:", err)
		os.Exit(1)
	}
}
