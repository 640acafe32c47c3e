#!/usr/bin/env bash
# Builds the phasecrawl image (deploy/Dockerfile) without pulling anything:
# the static binary is compiled here, then copied onto scratch with the CA
# bundle, a passwd/group naming user 65532 and an empty /data owned by it.
#
#   deploy/build-image.sh [TAG]          default TAG: phasecrawl:latest
#
# Environment: GO (go command, default go), CA_BUNDLE (default
# /etc/ssl/certs/ca-certificates.crt).
set -euo pipefail
tag=${1:-phasecrawl:latest}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
ca=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
if [ ! -r "$ca" ]; then
  echo "build-image: no CA bundle at $ca (install ca-certificates or set CA_BUNDLE)" >&2
  exit 1
fi
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
(cd "$root" && CGO_ENABLED=0 "${GO:-go}" build -trimpath -ldflags='-s -w' -o "$ctx/phasecrawl" .)
cp "$ca" "$ctx/ca-certificates.crt"
cp "$here/image/passwd" "$here/image/group" "$ctx/"
mkdir "$ctx/data"
cp "$here/Dockerfile" "$ctx/Dockerfile"
# Without the buildx plugin the classic builder does the job (scratch needs
# no BuildKit feature).
if [ -z "${DOCKER_BUILDKIT:-}" ] && ! docker buildx version >/dev/null 2>&1; then
  export DOCKER_BUILDKIT=0
fi
docker build --quiet --tag "$tag" "$ctx"
