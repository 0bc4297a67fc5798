#!/usr/bin/env bash
# Build the Kubernetes control plane, kubelet, kube-proxy, kubectl and etcd from the
# Go module proxy, and cache them outside the repository keyed by version.
#
# Kubernetes is not published as binaries on the registries this project may use, so
# we compile k8s.io/kubernetes in a small wrapper module that `replace`s every staging
# module with its published v0.X.Y twin. One multi-call binary (dispatching on argv[0],
# like the old hyperkube) links once instead of six times; kubectl, which the suite and
# its tests start over a thousand times a run, is also linked on its own (a second link,
# the packages already compiled).
#
# Usage: ci/build-kubernetes.sh            (prints the bin directory on stdout)
#        ci/build-kubernetes.sh --kubeadm  (kubeadm only, for kind node images: cached
#                                          apart, so adding it never rebuilds the rest;
#                                          prints the kubeadm binary's path)
# Env:   K8S_VERSION (v1.37.2; fixtures/providers/versions.py lists the served releases), ETCD_VERSION (v3.6.16), GPUSHARE_CACHE (/var/cache/gpushare-conformance)
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
CACHE="${GPUSHARE_CACHE:-/var/cache/gpushare-conformance}"
OUT="$CACHE/kubernetes-$K8S_VERSION-etcd-$ETCD_VERSION"
BIN="$OUT/bin"
TOOLS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)

log() { echo "[build-kubernetes] $*" >&2; }
source "$(dirname "${BASH_SOURCE[0]}")/cache-lock.sh"

if [[ "${1:-}" == "--kubeadm" ]]; then
  KOUT="$CACHE/kubeadm-$K8S_VERSION"
  cache_lock "kubeadm-$K8S_VERSION"
  if [[ -x "$KOUT/bin/kubeadm" && -f "$KOUT/.complete" ]]; then echo "$KOUT/bin/kubeadm"; exit 0; fi
  export PATH="$PATH:/usr/local/go/bin"
  command -v go >/dev/null || { log "error: the Go toolchain ('go') is required"; exit 1; }
  # Same settings and tags as the main build below, so Go's build cache serves every
  # package the two share.
  export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED="${CGO_ENABLED:-1}"
  mkdir -p "$KOUT/src" "$KOUT/bin"
  cd "$KOUT/src"
  upstream_mod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
  minor="${K8S_VERSION#v1.}"; staging_version="v0.${minor}"
  mapfile -t staging < <(grep -oE '^\s*k8s\.io/[a-z0-9-]+ => \./staging' "$upstream_mod" | awk '{print $1}' | sort -u)
  [[ ${#staging[@]} -gt 20 ]] || { log "error: found only ${#staging[@]} staging modules in $upstream_mod"; exit 1; }
  {
    echo "module gpushare.local/kubeadm"; echo
    echo "go $(awk '/^go /{print $2; exit}' "$upstream_mod")"; echo
    echo "require k8s.io/kubernetes $K8S_VERSION"; echo
    echo "replace ("
    for m in "${staging[@]}"; do echo "	$m => $m $staging_version"; done
    echo ")"
  } > go.mod
  cat > main.go <<'GO'
// Command kubeadm is upstream's cmd/kubeadm, built from the published module.
package main

import (
	"k8s.io/kubernetes/cmd/kubeadm/app"
	utilerrors "k8s.io/kubernetes/cmd/kubeadm/app/util/errors"
)

func main() { utilerrors.HandleError(app.Run()) }
GO
  go mod tidy >&2
  log "compiling kubeadm $K8S_VERSION"
  start=$(date +%s)
  go build -trimpath -tags selinux,notest,grpcnotrace -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${minor%%.*} -X k8s.io/component-base/version.gitTreeState=clean" -o "$KOUT/bin/kubeadm.tmp" . >&2
  mv "$KOUT/bin/kubeadm.tmp" "$KOUT/bin/kubeadm"
  log "kubeadm built in $(( $(date +%s) - start ))s"
  "$KOUT/bin/kubeadm" version -o short >&2
  touch "$KOUT/.complete"
  echo "$KOUT/bin/kubeadm"
  exit 0
fi

cache_lock "kubernetes-$K8S_VERSION-etcd-$ETCD_VERSION"
minor="${K8S_VERSION#v1.}"; staging_version="v0.${minor}"
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${minor%%.*} -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION"

# kubectl is a binary of its own: started from the multi-call one, every call would run the
# start-up of the API server, kubelet and the rest too (0.08 s of CPU a call, against 0.05;
# the test command makes over a thousand). Linked from the packages the build compiled.
build_kubectl() {
  local start; start=$(date +%s)
  (cd "$OUT/src/kube" && go build -trimpath -tags selinux,notest,grpcnotrace -ldflags "$ldflags" \
    -o "$BIN/kubectl.tmp" k8s.io/kubernetes/cmd/kubectl) >&2
  mv -f "$BIN/kubectl.tmp" "$BIN/kubectl"
  log "kubectl built in $(( $(date +%s) - start ))s"
}

if [[ -x "$BIN/kube" && -x "$BIN/etcd" && -f "$OUT/.complete" ]]; then
  if [[ -L "$BIN/kubectl" ]]; then  # a build from before kubectl was its own binary
    export PATH="$PATH:/usr/local/go/bin" GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED="${CGO_ENABLED:-1}"
    build_kubectl
  fi
  log "cached: $BIN"
  echo "$BIN"
  exit 0
fi

export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || { log "error: the Go toolchain ('go') is required"; exit 1; }
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED="${CGO_ENABLED:-1}"
mkdir -p "$OUT/src/kube" "$OUT/src/etcd" "$BIN"

# --- Kubernetes -------------------------------------------------------------------
cd "$OUT/src/kube"
log "reading the staging module list of k8s.io/kubernetes@$K8S_VERSION"
upstream_mod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
mapfile -t staging < <(grep -oE '^\s*k8s\.io/[a-z0-9-]+ => \./staging' "$upstream_mod" | awk '{print $1}' | sort -u)
[[ ${#staging[@]} -gt 20 ]] || { log "error: found only ${#staging[@]} staging modules in $upstream_mod"; exit 1; }
log "${#staging[@]} staging modules, pinned to $staging_version"
goversion=$(awk '/^go /{print $2; exit}' "$upstream_mod")

{
  echo "module gpushare.local/kube"
  echo
  echo "go $goversion"
  echo
  echo "require k8s.io/kubernetes $K8S_VERSION"
  echo
  echo "replace ("
  for m in "${staging[@]}"; do echo "	$m => $m $staging_version"; done
  echo ")"
} > go.mod

cat > main.go <<'GO'
// Command kube is a multi-call binary: its behaviour is chosen by the name it is
// invoked under (symlinks kube-apiserver, kubelet, ...), or by its first argument.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	kubectl "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {
	name := filepath.Base(os.Args[0])
	if name == "kube" && len(os.Args) > 1 {
		name = os.Args[1]
		os.Args = os.Args[1:]
	}
	var command *cobra.Command
	switch name {
	case "kube-apiserver":
		command = apiserver.NewAPIServerCommand()
	case "kube-controller-manager":
		command = controllermanager.NewControllerManagerCommand()
	case "kube-scheduler":
		command = scheduler.NewSchedulerCommand()
	case "kubelet":
		command = kubelet.NewKubeletCommand(context.Background())
	case "kube-proxy":
		command = proxy.NewProxyCommand()
	case "kubectl":
		command = kubectl.NewDefaultKubectlCommand()
		if err := cli.RunNoErrOutput(command); err != nil {
			kubectlutil.CheckErr(err)
		}
		return
	default:
		fmt.Fprintf(os.Stderr, "kube: unknown command %q (want kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy or kubectl)\n", name)
		os.Exit(2)
	}
	os.Exit(cli.Run(command))
}
GO

log "resolving modules (first run downloads a few hundred MB)"
go mod tidy >&2
log "compiling kubernetes $K8S_VERSION (tens of minutes on two cores when cold)"
start=$(date +%s)
go build -trimpath -tags selinux,notest,grpcnotrace -ldflags "$ldflags" -o "$BIN/kube.tmp" . >&2
mv "$BIN/kube.tmp" "$BIN/kube"
for t in "${TOOLS[@]}"; do [[ $t == kubectl ]] || ln -sf kube "$BIN/$t"; done
log "kubernetes built in $(( $(date +%s) - start ))s"
build_kubectl

# --- etcd ---------------------------------------------------------------------------
cd "$OUT/src/etcd"
cat > go.mod <<GOMOD
module gpushare.local/etcd

go $goversion

require go.etcd.io/etcd/server/v3 $ETCD_VERSION
GOMOD
cat > main.go <<'GO'
// Command etcd runs the etcd server from its published Go module.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
go mod tidy >&2
start=$(date +%s)
go build -trimpath -ldflags "-s -w" -o "$BIN/etcd.tmp" . >&2
mv "$BIN/etcd.tmp" "$BIN/etcd"
log "etcd built in $(( $(date +%s) - start ))s"

"$BIN/kube" kubelet --version >&2
"$BIN/etcd" --version >&2
touch "$OUT/.complete"
echo "$BIN"
