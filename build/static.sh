#!/bin/sh
# The one static build of baton, run by `make build`, `make image-build-check`
# and the Dockerfile alike: no cgo (so no libc and no ELF interpreter), paths
# trimmed, symbols stripped, VERSION stamped (default dev).
#
#   VERSION=v0.1.0 sh build/static.sh bin/baton
set -eu
out=${1:?usage: build/static.sh OUTPUT}
case $out in
/*) ;;
*) out="$PWD/$out" ;;
esac
cd "$(dirname "$0")/.."
CGO_ENABLED=0 exec "${GO:-go}" build -trimpath -ldflags "-s -w -X main.version=${VERSION:-dev}" -o "$out" ./cmd/baton
