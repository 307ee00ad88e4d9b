#!/usr/bin/env bash
# build.sh builds the binaries of the end-to-end test control plane into a
# cache directory outside the work tree, keyed by their versions:
#
#   ${KM_CACHE:-$HOME/.cache/karpenter-migrate}/bin-k8s<K>-kwok<W>-karpenter<C>
#
#   etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl
#       one `go build` in this wrapper module (go.mod pins k8s.io/kubernetes
#       and its staging modules; etcd is the version Kubernetes requires)
#   kwok            go install sigs.k8s.io/kwok/cmd/kwok@KWOK_VERSION
#   karpenter-kwok  go install sigs.k8s.io/karpenter/kwok@KARPENTER_VERSION
#                   (Karpenter core with its kwok cloud provider)
#
# A group is built only when one of its binaries is missing. Builds go to a
# temporary directory beside the cache directory and are renamed into place,
# so an interrupted build never leaves a partial binary behind; concurrent
# runs are serialised with flock(1) when it is available. The script
# prints the binary directory on stdout as its last line; progress goes to
# stderr. `build.sh --print-dir` prints the directory without building.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
source "$here/versions.env"
export GOTOOLCHAIN=local

cache=${KM_CACHE:-$HOME/.cache/karpenter-migrate}
dir="$cache/bin-k8s${K8S_VERSION#v}-kwok${KWOK_VERSION#v}-karpenter${KARPENTER_VERSION#v}"
if [[ "${1:-}" == "--print-dir" ]]; then
  echo "$dir"
  exit 0
fi

log() { echo "build.sh: $*" >&2; }

# missing NAME... succeeds when one of the named binaries is not in $dir.
missing() {
  local b
  for b in "$@"; do
    [[ -x "$dir/$b" ]] || return 0
  done
  return 1
}

mkdir -p "$dir"
# One build at a time per cache: a second run waits, then finds the binaries.
if command -v flock >/dev/null; then
  exec 9>"$dir.lock"
  flock 9
fi
tmp=$(mktemp -d "$dir.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# install moves the freshly built binaries from $tmp into $dir; rename is
# atomic because both directories are on the same file system.
install() {
  local b
  for b in "$@"; do
    mv -f "$tmp/$b" "$dir/$b"
  done
}

k8s_bins=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl)
if missing "${k8s_bins[@]}"; then
  minor=${K8S_VERSION#v1.}
  minor=${minor%%.*}
  ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  done
  log "building Kubernetes $K8S_VERSION and etcd (about 7 minutes from a clean Go cache)"
  (cd "$here" && go build -mod=readonly -trimpath -ldflags "$ldflags" -o "$tmp/" \
    k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler \
    k8s.io/kubernetes/cmd/kubectl \
    go.etcd.io/etcd/server/v3)
  mv "$tmp/server" "$tmp/etcd"
  install "${k8s_bins[@]}"
fi

if missing kwok; then
  log "building kwok $KWOK_VERSION (about 2 minutes from a clean Go cache)"
  (cd "$tmp" && GOBIN="$tmp" GOFLAGS= go install -trimpath \
    -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}" \
    "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION")
  install kwok
fi

if missing karpenter-kwok; then
  log "building Karpenter $KARPENTER_VERSION with the kwok provider (about 3 minutes from a clean Go cache)"
  (cd "$tmp" && GOBIN="$tmp" GOFLAGS= go install -trimpath \
    -ldflags "-s -w -X sigs.k8s.io/karpenter/pkg/operator.Version=$KARPENTER_VERSION" \
    "sigs.k8s.io/karpenter/kwok@$KARPENTER_VERSION")
  mv "$tmp/kwok" "$tmp/karpenter-kwok"
  install karpenter-kwok
fi

echo "$dir"
