#!/usr/bin/env bash
# Build (once) the kind CLI from the Go module proxy and cache it outside the
# repository; prints the binary's path.
# kind v0.33.0: builds with the local Go toolchain (GOTOOLCHAIN=local) and drives
# Kubernetes 1.34 to 1.37 nodes (kubeadm v1beta3 configuration below 1.36, v1beta4
# from it; containerd 1.6/2.x nodes).
set -euo pipefail
KIND_VERSION="${KIND_VERSION:-v0.33.0}"
CACHE="${GPUSHARE_CACHE:-/var/cache/gpushare-conformance}"
OUT="$CACHE/kind-$KIND_VERSION/bin"
source "$(dirname "${BASH_SOURCE[0]}")/../cache-lock.sh"
cache_lock "kind-$KIND_VERSION"
if [[ -x "$OUT/kind" ]]; then echo "$OUT/kind"; exit 0; fi
export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || { echo "[build-kind] error: the Go toolchain ('go') is required" >&2; exit 1; }
mkdir -p "$OUT"
echo "[build-kind] go install sigs.k8s.io/kind@$KIND_VERSION" >&2
tmp=$(mktemp -d "$CACHE/kind-build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0 GOBIN="$tmp" go install "sigs.k8s.io/kind@$KIND_VERSION" >&2
mv "$tmp/kind" "$OUT/kind"
"$OUT/kind" version >&2
echo "$OUT/kind"
