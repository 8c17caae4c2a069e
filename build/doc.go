// Package build holds the static build of baton (static.sh) and the tests
// that keep it one build: the Dockerfile, `make build` and `make
// image-build-check` all run the same script, and what it produces is a
// statically linked, stripped binary with its version stamped.
package build
