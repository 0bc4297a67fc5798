#!/usr/bin/env bash
# Build (once) the Debian bookworm root filesystem of the kind node image: systemd as
# init, Debian's containerd, runc and CNI plugins, iptables and the tools kubelet and
# kubeadm call. Cached as a tarball outside the repository; prints its path.
set -euo pipefail
CACHE="${GPUSHARE_CACHE:-/var/cache/gpushare-conformance}"
SUITE="${ROOTFS_SUITE:-bookworm}"
MIRROR="${ROOTFS_MIRROR:-http://deb.debian.org/debian}"
PACKAGES="systemd,systemd-sysv,dbus,containerd,runc,containernetworking-plugins,iptables,iproute2,conntrack,socat,ethtool,kmod,ca-certificates,procps,util-linux,mount,libseccomp2,ebtables,python3"
OUT="$CACHE/kind-node-rootfs-$SUITE-$(echo "$PACKAGES" | sha256sum | cut -c1-12).tar"
if [[ -f "$OUT" ]]; then echo "$OUT"; exit 0; fi
[[ $(id -u) -eq 0 ]] || { echo "[build-node-rootfs] error: debootstrap needs root" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "[build-node-rootfs] error: debootstrap missing (ci/install-host-deps.sh)" >&2; exit 1; }
mkdir -p "$CACHE"
work=$(mktemp -d "$CACHE/node-rootfs-work.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "[build-node-rootfs] debootstrap $SUITE with systemd and containerd (a few minutes, once)" >&2
debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$work/root" "$MIRROR" >&2
rm -rf "$work/root/var/cache/apt/archives/"*.deb "$work/root/var/lib/apt/lists/"* \
  "$work/root/usr/share/doc" "$work/root/usr/share/man" "$work/root/usr/share/locale"
tar --numeric-owner --exclude=./dev/* --exclude=./proc/* --exclude=./sys/* -C "$work/root" -cf "$OUT.tmp" .
mv "$OUT.tmp" "$OUT"
echo "$OUT"
