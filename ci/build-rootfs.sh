#!/usr/bin/env bash
# Build (once) the Debian bookworm root filesystem our container images start from,
# with python3, and cache it as a tarball outside the repository.
# No image registry is reachable, so images are assembled from this rootfs locally.
# Prints the tarball's path on stdout.
set -euo pipefail
CACHE="${GPUSHARE_CACHE:-/var/cache/gpushare-conformance}"
SUITE="${ROOTFS_SUITE:-bookworm}"
MIRROR="${ROOTFS_MIRROR:-http://deb.debian.org/debian}"
PACKAGES="python3,ca-certificates,procps"
OUT="$CACHE/rootfs-$SUITE-minbase-python3.tar"
source "$(dirname "${BASH_SOURCE[0]}")/cache-lock.sh"
cache_lock "rootfs-$SUITE"
if [[ -f "$OUT" ]]; then echo "$OUT"; exit 0; fi
command -v debootstrap >/dev/null || { echo "[build-rootfs] error: debootstrap missing (ci/install-host-deps.sh)" >&2; exit 1; }
work=$(mktemp -d "$CACHE/rootfs-work.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "[build-rootfs] debootstrap $SUITE ($PACKAGES), a few minutes once" >&2
debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$work/root" "$MIRROR" >&2
# Trim what images never need.
rm -rf "$work/root/var/cache/apt/archives/"*.deb "$work/root/var/lib/apt/lists/"* "$work/root/usr/share/doc" "$work/root/usr/share/man" "$work/root/usr/share/locale"
tar --numeric-owner --exclude=./dev/* --exclude=./proc/* --exclude=./sys/* -C "$work/root" -cf "$OUT.tmp" .
mv "$OUT.tmp" "$OUT"
echo "$OUT"
