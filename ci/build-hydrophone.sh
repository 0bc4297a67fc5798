#!/usr/bin/env bash
# Build (once) hydrophone, the runner that drives a Kubernetes conformance image, from
# its Go module and cache it outside the repository keyed by version; prints the
# binary's path. The suite image follows that image's contract (docs/in-cluster.md),
# and tests/local/test_hydrophone.py runs this binary against the local cluster.
set -euo pipefail
HYDROPHONE_VERSION="${HYDROPHONE_VERSION:-v0.8.0}"
CACHE="${GPUSHARE_CACHE:-/var/cache/gpushare-conformance}"
OUT="$CACHE/hydrophone-$HYDROPHONE_VERSION/bin"
source "$(dirname "${BASH_SOURCE[0]}")/cache-lock.sh"
cache_lock "hydrophone-$HYDROPHONE_VERSION"
if [[ -x "$OUT/hydrophone" ]]; then echo "$OUT/hydrophone"; exit 0; fi
export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || { echo "[build-hydrophone] error: the Go toolchain ('go') is required" >&2; exit 1; }
mkdir -p "$OUT"
echo "[build-hydrophone] go install sigs.k8s.io/hydrophone@$HYDROPHONE_VERSION" >&2
start=$(date +%s)
tmp=$(mktemp -d "$CACHE/hydrophone-build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0 GOBIN="$tmp" go install "sigs.k8s.io/hydrophone@$HYDROPHONE_VERSION" >&2
mv "$tmp/hydrophone" "$OUT/hydrophone"
echo "[build-hydrophone] built in $(( $(date +%s) - start ))s" >&2
"$OUT/hydrophone" --version >&2
echo "$OUT/hydrophone"
