#!/bin/sh
# bench-karpenter.sh: Karpenter's own scheduling benchmark and ours, one after
# the other on this machine, and the ratio of their pods/s.
#
#   Karpenter  BenchmarkScheduling$PODS (pkg/controllers/provisioning/scheduling,
#              -tags test_performance) from sigs.k8s.io/karpenter@$KARPENTER_VERSION
#   engine     BenchmarkKarpenterMix$PODS (pkg/engine): the same pod mix and
#              400 fake instance types
#
# Karpenter's module is downloaded with the Go toolchain (the module proxy) and
# unpacked into $KM_CACHE/karpenter-src-<version>, outside the repository, once;
# nothing of it is committed or copied into the tree. POSIX sh.
#
#   PODS=5000                  pod count (Karpenter has 1 50 100 500 1000 2000 5000 10000 20000)
#   KARPENTER_VERSION=v1.14.1  the Karpenter core module version
#   BENCHTIME=1s               go test -benchtime for both
#   GO=go                      the Go toolchain
set -eu

PODS=${PODS:-5000}
KARPENTER_VERSION=${KARPENTER_VERSION:-v1.14.1}
BENCHTIME=${BENCHTIME:-1s}
GO=${GO:-go}
cache=${KM_CACHE:-$HOME/.cache/karpenter-migrate}
src="$cache/karpenter-src-${KARPENTER_VERSION#v}"
repo=$(cd "$(dirname "$0")/.." && pwd)

log() { printf 'bench-karpenter: %s\n' "$*" >&2; }

if [ ! -f "$src/go.mod" ]; then
  mkdir -p "$cache"
  scratch=$(mktemp -d "$cache/.karpenter-src.XXXXXX")
  trap 'rm -rf "$scratch"' EXIT
  log "downloading sigs.k8s.io/karpenter@$KARPENTER_VERSION"
  # Outside any module, so the repository's go.mod is neither read nor changed.
  moddir=$(cd "$scratch" && GO111MODULE=on GOFLAGS=-mod=mod "$GO" mod download -json "sigs.k8s.io/karpenter@$KARPENTER_VERSION" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')
  if [ ! -f "$moddir/go.mod" ]; then log "go mod download gave no module directory"; exit 1; fi
  # The module cache is read-only; the benchmark needs a writable main module.
  cp -R "$moddir" "$scratch/src"
  chmod -R u+w "$scratch/src"
  mv "$scratch/src" "$src"
  rm -rf "$scratch"
  trap - EXIT
fi

out=$(mktemp)
trap 'rm -f "$out"' EXIT

log "Karpenter $KARPENTER_VERSION BenchmarkScheduling$PODS"
(cd "$src" && "$GO" test -tags test_performance -run '^$' -benchtime "$BENCHTIME" -benchmem \
  -bench "^BenchmarkScheduling$PODS\$" ./pkg/controllers/provisioning/scheduling/) | tee -a "$out"

log "engine BenchmarkKarpenterMix$PODS"
(cd "$repo" && "$GO" test -run '^$' -benchtime "$BENCHTIME" -benchmem \
  -bench "^BenchmarkKarpenterMix$PODS\$" ./pkg/engine/) | tee -a "$out"

# The value printed before a unit on a benchmark's result line.
metric() { awk -v bench="$1" -v unit="$2" '$1 ~ "^"bench"(-[0-9]+)?$" { for (i = 2; i < NF; i++) if ($(i+1) == unit) print $i }' "$out"; }
karpenter=$(metric "BenchmarkScheduling$PODS" pods/sec)
engine=$(metric "BenchmarkKarpenterMix$PODS" pods/s)
if [ -z "$karpenter" ] || [ -z "$engine" ]; then log "a benchmark reported no pods/s"; exit 1; fi

echo
printf '%-34s %12s %8s %12s\n' benchmark pods/s nodes B/op
printf '%-34s %12s %8s %12s\n' "Karpenter BenchmarkScheduling$PODS" "$karpenter" \
  "$(metric "BenchmarkScheduling$PODS" nodes)" "$(metric "BenchmarkScheduling$PODS" B/op)"
printf '%-34s %12s %8s %12s\n' "engine BenchmarkKarpenterMix$PODS" "$engine" \
  "$(metric "BenchmarkKarpenterMix$PODS" nodes)" "$(metric "BenchmarkKarpenterMix$PODS" B/op)"
printf 'engine $/h %s, Karpenter-equivalent $/h %s\n' \
  "$(metric "BenchmarkKarpenterMix$PODS" '$/h')" "$(metric "BenchmarkKarpenterMix$PODS" 'karpenter$/h')"
load=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)
awk -v e="$engine" -v k="$karpenter" -v load="$load" 'BEGIN { printf "ratio engine/Karpenter: %.0fx (load average %s)\n", e / k, load }'
