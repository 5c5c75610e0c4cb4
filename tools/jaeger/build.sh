#!/usr/bin/env bash
# Builds the Jaeger v2 binary the Jaeger source tests run against, once per Jaeger version, into
# the user cache directory (the place Go's os.UserCacheDir names), and prints its path. The build
# takes minutes, so it is kept across runs and across work trees; the tests look for it at the
# same path (sources/jaeger/jaegertest).
set -euo pipefail
cd "$(dirname "$0")"
version=$(go list -m -f '{{.Version}}' github.com/jaegertracing/jaeger)
dir="${XDG_CACHE_HOME:-$HOME/.cache}/stormwatch/jaeger-$version-$(go env GOOS)-$(go env GOARCH)"
bin="$dir/jaeger"
if [ ! -x "$bin" ]; then
  mkdir -p "$dir"
  tmp=$(mktemp "$dir/jaeger.XXXXXX")
  trap 'rm -f "$tmp"' EXIT
  # -trimpath and no VCS stamping keep the binary the same whichever checkout built it.
  go build -trimpath -o "$tmp" github.com/jaegertracing/jaeger/cmd/jaeger
  # A rename is atomic: a concurrent build or test never sees half a binary.
  mv "$tmp" "$bin"
fi
echo "$bin"
