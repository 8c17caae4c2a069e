#!/bin/sh
# The one static build of baton, run by `make build`, `make image-build-check`
# and the Dockerfile alike: no cgo (so no libc and no ELF interpreter), paths
# trimmed, symbols stripped, VERSION stamped (default dev). TAGS are its build
# tags: sidecar (the default) is the build that runs beside every agent,
# without the demo, chaos and the injector; TAGS= (empty) is the full build,
# the injector's image.
#
#   VERSION=v0.1.0 sh build/static.sh bin/baton
#   TAGS= sh build/static.sh bin/baton-full
set -eu
out=${1:?usage: build/static.sh OUTPUT}
case $out in
/*) ;;
*) out="$PWD/$out" ;;
esac
cd "$(dirname "$0")/.."
CGO_ENABLED=0 exec "${GO:-go}" build -trimpath -tags "${TAGS-sidecar}" -ldflags "-s -w -X main.version=${VERSION:-dev}" -o "$out" ./cmd/baton
