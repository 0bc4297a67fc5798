#!/usr/bin/env bash
# Install the Debian packages the local cluster and the native build need.
# Idempotent: installs only what is missing, so a warm machine pays nothing.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mapfile -t wanted < <(grep -vE '^\s*(#|$)' "$here/host-packages.txt")
missing=()
for pkg in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "[install-host-deps] all ${#wanted[@]} host packages present" >&2
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "[install-host-deps] error: need root to install: ${missing[*]}" >&2
  exit 1
fi
echo "[install-host-deps] installing: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# Another set-up installing at the same time holds dpkg's lock: wait for it.
apt-get -o DPkg::Lock::Timeout=900 update -qq >&2
apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends "${missing[@]}" >&2
# Debian starts containerd as a service on install; the local cluster runs its own.
# The same for docker.io: ci/docker-service.sh starts dockerd only for the kind tests.
if command -v systemctl >/dev/null 2>&1; then
  systemctl disable --now containerd docker.service docker.socket >/dev/null 2>&1 || true
fi
