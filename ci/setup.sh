#!/usr/bin/env bash
# Everything a fresh machine needs before the suite runs: host packages, the Python
# environment (.venv), the native GPU layer, and the Kubernetes binaries (cached
# outside the repository, so only the first run on a machine pays for the build).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
step() { echo "[setup] $*" >&2; }

step "host packages"
bash ci/install-host-deps.sh

if [[ ! -x .venv/bin/python ]]; then
  step "creating .venv"
  python3 -m venv .venv
fi
step "installing the project into .venv (uv: a clean clone's install takes 5 s, pip's 14 s)"
uv_version=0.13.10
if [[ "$(.venv/bin/uv --version 2>/dev/null)" != "uv $uv_version"* ]]; then
  .venv/bin/python -m pip install --quiet --disable-pip-version-check "uv==$uv_version" >&2
fi
# pip stays in .venv, upgraded: the tests install wheels into fresh venvs with
# ``pip --python`` and set-up downloads wheels with it below.
.venv/bin/uv pip install --quiet --python .venv/bin/python --upgrade pip -e '.[dev]' >&2
# testing-cabal's fixtures, for the test that installs it beside this project.
CACHE="${GPUSHARE_CACHE:-/var/cache/gpushare-conformance}"
source ci/cache-lock.sh
wheels="$CACHE/wheels"
(
  cache_lock wheels
  if ! ls "$wheels"/fixtures-*.whl >/dev/null 2>&1; then
    .venv/bin/python -m pip download --quiet --no-deps fixtures -d "$wheels" >&2
  fi
  # Other pytest plugins, with this project's own dependencies, for the test that installs
  # them all in a fresh venv (tests/suite/test_beside_other_plugins.py, offline from here).
  neighbours=(pytest-timeout pytest-rerunfailures pytest-cov pytest-xdist)
  if ! .venv/bin/python -m pip download --quiet --no-index --find-links "$wheels" --no-build-isolation \
    -d "$wheels" . "${neighbours[@]}" >/dev/null 2>&1; then
    .venv/bin/python -m pip download --quiet --no-build-isolation -d "$wheels" . "${neighbours[@]}" >&2
  fi
)

step "native GPU layer (make -C native)"
make -s -j"$(nproc)" -C native >&2  # one compiler per core: 6 s against 12 s from a clean clone

step "Kubernetes binaries (cached; the first build takes tens of minutes)"
bash ci/build-kubernetes.sh >/dev/null
step "kind provider: kubeadm and the kind CLI (cached; Docker is started by ci/docker-service.sh when used)"
bash ci/build-kubernetes.sh --kubeadm >/dev/null
bash ci/kind/build-kind.sh >/dev/null
step "hydrophone, the conformance runner that drives the suite image (cached; tests/local/test_hydrophone.py)"
bash ci/build-hydrophone.sh >/dev/null
step "HTML report: Allure 3 from npm (cached; no Java) and Debian's chromium for its test"
allure_prefix="$CACHE/npm"
allure_version=3.18.0
(
  cache_lock npm
  if [[ "$(node -p "require('$allure_prefix/node_modules/allure/package.json').version" 2>/dev/null)" != "$allure_version" ]]; then
    command -v npm >/dev/null || { echo "[setup] error: npm is needed to install allure $allure_version" >&2; exit 1; }
    npm install --prefix "$allure_prefix" --no-save --no-audit --no-fund --loglevel=error "allure@$allure_version" >&2
  fi
)
step "done"
