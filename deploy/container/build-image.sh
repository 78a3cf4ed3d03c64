#!/usr/bin/env bash
# Builds the Switchyard container image with podman (`make image`,
# `make image-cuda`), installing and configuring podman first if needed.
#
#   deploy/container/build-image.sh [cpu|cuda] [TAG]
#
# cpu (default): deploy/container/Containerfile, tag switchyard:latest
# cuda:          deploy/container/Containerfile.cuda, tag switchyard:cuda
#
# The bases are the public images when podman can pull them, else images
# made once from Debian packages (see lib.sh; SWITCHYARD_BASE=public|local
# forces one). The build runs with the host's network so that cargo, pip
# and apt reach their registries; the crate registry and cargo's target
# folder are cache mounts kept between builds.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$CT_ROOT"

VARIANT="${1:-cpu}"
case "$VARIANT" in
    cpu) FILE=deploy/container/Containerfile; TAG="${2:-localhost/switchyard:latest}" ;;
    cuda) FILE=deploy/container/Containerfile.cuda; TAG="${2:-localhost/switchyard:cuda}" ;;
    *) die "usage: $0 [cpu|cuda] [TAG]" ;;
esac

ct_setup_podman
ct_choose_bases
say "building $TAG from $FILE"
# The host's trust store goes in as the `ca-bundle` secret (see with-ca.sh):
# where TLS is inspected by a proxy, pip and cargo need its CA.
secret=()
[ -s /etc/ssl/certs/ca-certificates.crt ] && secret=(--secret id=ca-bundle,src=/etc/ssl/certs/ca-certificates.crt)
start=$(date +%s)
podman build --format docker --network host "${secret[@]}" \
    --build-arg "BUILD_IMAGE=$BUILD_BASE" --build-arg "RUNTIME_IMAGE=$RUNTIME_BASE" \
    -f "$FILE" -t "$TAG" . || die "podman build of $TAG failed"
size=$(podman image inspect --format '{{.Size}}' "$TAG")
say "built $TAG in $(( $(date +%s) - start )) s: $(( size / 1000000 )) MB ($size bytes)"
