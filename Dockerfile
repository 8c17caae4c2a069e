# syntax=docker/dockerfile:1
# Baton's image: one static binary on distroless, run as UID 1337, the UID
# that `baton iptables --proxy-uid` exempts from redirection. No shell.
#
#   docker build --build-arg VERSION=$(git describe --tags --always) -t baton .
#
# The init image of transparent mode (the same binary beside iptables, which
# `baton iptables` drives) is the init target, and the injector's image (the
# full build: the admission webhook, inject, the demo; never beside an agent)
# the injector target:
#
#   docker build --build-arg VERSION=... --target init -t baton-init .
#   docker build --build-arg VERSION=... --target injector -t baton-injector .

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN ["go", "mod", "download"]
COPY . .
ARG VERSION=dev
RUN ["sh", "build/static.sh", "/out/baton"]
RUN ["env", "TAGS=", "sh", "build/static.sh", "/out/baton-full"]

FROM debian:bookworm-slim AS init
RUN apt-get update \
 && apt-get install -y --no-install-recommends iptables \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/baton /baton
ENTRYPOINT ["/baton"]

FROM gcr.io/distroless/static-debian12:nonroot AS injector
LABEL org.opencontainers.image.source="https://github.com/batonproxy/baton" \
      org.opencontainers.image.description="Baton's sidecar injector: the admission webhook that adds Baton to agents' pods"
COPY --from=build /out/baton-full /baton
USER 1337:1337
ENTRYPOINT ["/baton"]

FROM gcr.io/distroless/static-debian12:nonroot
LABEL org.opencontainers.image.source="https://github.com/batonproxy/baton" \
      org.opencontainers.image.description="Baton: a sidecar proxy for handoffs between AI agents"
COPY --from=build /out/baton /baton
USER 1337:1337
EXPOSE 15001 15006 15000
ENTRYPOINT ["/baton"]
