#!/usr/bin/env bash
# Builds kube-apiserver and etcd (and, when named, the node harness's other components) from the Go module
# proxy into a per-version cache outside the repo. Idempotent: a cached binary is not rebuilt. The Kubernetes
# binaries are cached per KUBE_VERSION; etcd, helm and containerd do not depend on it, so each of their
# versions is built once and linked into every Kubernetes version's directory.
#
#   build.sh [kubelet] [kube-scheduler] [kube-controller-manager] [kubectl] [helm] [containerd] [node]
#
#   containerd     containerd, ctr and containerd-shim-runc-v2, linked as containerd/
#   containerd-1.7 containerd $CONTAINERD_17_VERSION alone (its CRI plugin's configuration is what a test reads), linked as containerd-1.7
#   node           containerd (2 and 1.7), kubelet, kube-scheduler, kube-controller-manager, kubectl and helm: all the node harness runs
#
#   KUBE_VERSION        Kubernetes release to build (default: the newest in kube-versions beside this script)
#   ETCD_VERSION        etcd server release (default v3.7.3)
#   HELM_VERSION        Helm release (default v4.3.2; cached beside the control plane)
#   CONTAINERD_VERSION  containerd release (default v2.4.2; cached beside the control plane)
#   NFDCTL_CACHE   cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/nfdctl)
set -euo pipefail

KUBE_VERSION="${KUBE_VERSION:-$(grep -v '^#' "$(dirname "${BASH_SOURCE[0]}")/kube-versions" | tail -n 1)}"
ETCD_VERSION="${ETCD_VERSION:-v3.7.3}"
HELM_VERSION="${HELM_VERSION:-v4.3.2}"
CONTAINERD_VERSION="${CONTAINERD_VERSION:-v2.4.2}"
CONTAINERD_17_VERSION="${CONTAINERD_17_VERSION:-v1.7.35}"
CACHE="${NFDCTL_CACHE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/nfdctl}"
BIN="$CACHE/controlplane/kube-$KUBE_VERSION-etcd-$ETCD_VERSION"
ETCD_DIR="$CACHE/controlplane/etcd-$ETCD_VERSION"
HELM_DIR="$CACHE/controlplane/helm-$HELM_VERSION"
CONTAINERD_DIR="$CACHE/controlplane/containerd-$CONTAINERD_VERSION"
CONTAINERD_17_DIR="$CACHE/controlplane/containerd-$CONTAINERD_17_VERSION"

# A dependency that wants a newer Go must fail loudly instead of fetching a toolchain.
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false

log() { printf 'controlplane: %s\n' "$*" >&2; }

if ! command -v go >/dev/null; then
  log "go is not installed; install Go >= 1.26 (it builds kube-apiserver and etcd for the tests)"
  exit 2
fi

mkdir -p "$BIN"

# locked <lock file> <command...>: two builds of the same binary (a test's prepare beside `npm run demo`, or two
# Kubernetes versions sharing etcd) would move each other's .tmp output away, so the second waits, then finds
# it cached. Only a build takes a lock: a cached binary never waits for another one's build.
locked() {
  local fd
  exec {fd}>"$1"
  flock "$fd"
  "${@:2}"
  exec {fd}>&-
}

build_etcd() {
  [[ -x "$ETCD_DIR/etcd" ]] || locked "$ETCD_DIR.lock" build_etcd_now
  ln -sf "$ETCD_DIR/etcd" "$BIN/etcd"
}

build_etcd_now() {
  [[ -x "$ETCD_DIR/etcd" ]] && return 0
  local mod; mod="$(mktemp -d)"
  log "building etcd $ETCD_VERSION (module dir $mod)"
  mkdir -p "$ETCD_DIR.tmp"
  (
    cd "$mod"
    go mod init nfdctl.local/etcd-build >/dev/null 2>&1
    go get -tool "go.etcd.io/etcd/server/v3@$ETCD_VERSION"
    go build -trimpath -ldflags "-s -w" -o "$ETCD_DIR.tmp/etcd" go.etcd.io/etcd/server/v3
  )
  rm -rf "$ETCD_DIR"
  mv "$ETCD_DIR.tmp" "$ETCD_DIR"
  rm -rf "$mod"
}

# kube-apiserver and kubelet live in k8s.io/kubernetes, whose staging modules need replace lines.
build_kubernetes_command() {
  [[ -x "$BIN/$1" ]] || locked "$BIN/.build.lock" build_kubernetes_command_now "$1"
}

build_kubernetes_command_now() {
  local command="$1"
  [[ -x "$BIN/$command" ]] && return 0
  local mod minor v0; mod="$(mktemp -d)"
  minor="$(cut -d. -f2 <<<"$KUBE_VERSION")"
  v0="v0.${KUBE_VERSION#v1.}"
  log "building $command $KUBE_VERSION (module dir $mod)"
  (
    cd "$mod"
    go mod init nfdctl.local/apiserver-build >/dev/null 2>&1
    # Kubernetes' own go.mod (served by the proxy) names every staging module in its
    # ./staging replace lines; each is published as v0.Y.Z, so replace them all with that.
    local gomod
    gomod="$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
    [[ -f "$gomod" ]] || { log "could not download k8s.io/kubernetes@$KUBE_VERSION go.mod"; exit 1; }
    local staging
    staging="$(grep -oE 'k8s\.io/[a-z0-9-]+ => \./staging' "$gomod" | awk '{print $1}' | sort -u)"
    for m in $staging; do go mod edit "-replace=$m=$m@$v0"; done
    log "replaced $(wc -w <<<"$staging") staging modules with $v0"
    go get -tool "k8s.io/kubernetes/cmd/$command@$KUBE_VERSION"
    go build -trimpath -tags grpcnotrace \
      -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor" \
      -o "$BIN/$command.tmp" "k8s.io/kubernetes/cmd/$command"
  )
  mv "$BIN/$command.tmp" "$BIN/$command"
  rm -rf "$mod"
}

build_helm() {
  [[ -x "$HELM_DIR/helm" ]] || locked "$HELM_DIR.lock" build_helm_now
  ln -sf "$HELM_DIR/helm" "$BIN/helm"
}

build_helm_now() {
  [[ -x "$HELM_DIR/helm" ]] && return 0
  local mod major; mod="$(mktemp -d)"
  major="$(cut -d. -f1 <<<"$HELM_VERSION")"
  log "building helm $HELM_VERSION (module dir $mod)"
  mkdir -p "$HELM_DIR.tmp"
  (
    cd "$mod"
    go mod init nfdctl.local/helm-build >/dev/null 2>&1
    go get -tool "helm.sh/helm/$major/cmd/helm@$HELM_VERSION"
    go build -trimpath -ldflags "-s -w -X helm.sh/helm/$major/internal/version.version=$HELM_VERSION" \
      -o "$HELM_DIR.tmp/helm" "helm.sh/helm/$major/cmd/helm"
  )
  rm -rf "$HELM_DIR"
  mv "$HELM_DIR.tmp" "$HELM_DIR"
  rm -rf "$mod"
}

# containerd's go.mod has no replace lines, so `go install module@version` builds it as released. No cgo:
# btrfs is the only part that needs it, and the node runs overlayfs.
containerd_built() {
  [[ -x "$CONTAINERD_DIR/containerd" && -x "$CONTAINERD_DIR/ctr" && -x "$CONTAINERD_DIR/containerd-shim-runc-v2" ]]
}

build_containerd() {
  containerd_built || locked "$CONTAINERD_DIR.lock" build_containerd_now
  ln -sfn "$CONTAINERD_DIR" "$BIN/containerd"
}

build_containerd_now() {
  containerd_built && return 0
  local dir="$CONTAINERD_DIR" pkg=github.com/containerd/containerd/v2
  local out; out="$(mktemp -d)"
  local ldflags="-s -w -X $pkg/version.Version=$CONTAINERD_VERSION -X $pkg/version.Revision=goproxy -X $pkg/version.Package=$pkg"
  log "building containerd, ctr and containerd-shim-runc-v2 $CONTAINERD_VERSION (into $out)"
  GOBIN="$out" go install -trimpath -tags "urfave_cli_no_docs no_btrfs no_devmapper no_zfs" -ldflags "$ldflags" \
    "$pkg/cmd/containerd@$CONTAINERD_VERSION" "$pkg/cmd/ctr@$CONTAINERD_VERSION"
  GOBIN="$out" go install -trimpath -tags "urfave_cli_no_docs no_grpc" -ldflags "$ldflags" "$pkg/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION"
  rm -rf "$dir"
  mv "$out" "$dir"
  chmod 755 "$dir"
}

build_containerd_17() {
  [[ -x "$CONTAINERD_17_DIR/containerd" ]] || locked "$CONTAINERD_17_DIR.lock" build_containerd_17_now
  ln -sfn "$CONTAINERD_17_DIR/containerd" "$BIN/containerd-1.7"
}

# containerd 1.x's go.mod has an exclude line, which `go install module@version` refuses: a module of our own
# carries it instead.
build_containerd_17_now() {
  [[ -x "$CONTAINERD_17_DIR/containerd" ]] && return 0
  local mod pkg=github.com/containerd/containerd; mod="$(mktemp -d)"
  log "building containerd $CONTAINERD_17_VERSION (module dir $mod)"
  mkdir -p "$CONTAINERD_17_DIR.tmp"
  (
    cd "$mod"
    go mod init nfdctl.local/containerd-17-build >/dev/null 2>&1
    local gomod
    gomod="$(go mod download -json "$pkg@$CONTAINERD_17_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
    grep -oE '^exclude [^ ]+ [^ ]+' "$gomod" | while read -r _ module version; do go mod edit "-exclude=$module@$version"; done
    go get -tool "$pkg/cmd/containerd@$CONTAINERD_17_VERSION"
    go build -trimpath -tags "urfave_cli_no_docs no_btrfs no_devmapper no_zfs no_aufs" -ldflags "-s -w -X $pkg/version.Version=$CONTAINERD_17_VERSION" \
      -o "$CONTAINERD_17_DIR.tmp/containerd" "$pkg/cmd/containerd"
  )
  rm -rf "$CONTAINERD_17_DIR"
  mv "$CONTAINERD_17_DIR.tmp" "$CONTAINERD_17_DIR"
  rm -rf "$mod"
}

start=$(date +%s)
build_etcd
build_kubernetes_command kube-apiserver
for extra in "$@"; do
  case "$extra" in
    kubelet | kube-scheduler | kube-controller-manager | kubectl) build_kubernetes_command "$extra" ;;
    helm) build_helm ;;
    containerd) build_containerd ;;
    containerd-1.7) build_containerd_17 ;;
    node) build_containerd; build_containerd_17; for c in kubelet kube-scheduler kube-controller-manager kubectl; do build_kubernetes_command "$c"; done; build_helm ;;
    *) log "unknown component $extra (kubelet, kube-scheduler, kube-controller-manager, kubectl, helm, containerd, containerd-1.7 or node)"; exit 2 ;;
  esac
done
log "binaries ready in $BIN ($(( $(date +%s) - start ))s)"
echo "$BIN"
