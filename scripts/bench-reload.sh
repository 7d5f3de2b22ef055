#!/usr/bin/env bash
# make bench-reload: how long a plugin ConfigMap change takes to be served, with the release
# operator on the local cluster. Applies a labelled ConfigMap RUNS times (default 10),
# alternating two versions of the pre-check type, and polls the operator's /plugins every
# 5 ms until the new digest is served. Prints min/median/max of the time from the start of
# `kubectl apply` and from its return (the API server has the change) to the new version
# being served. The first two changes compile each version; later ones find it compiled.
# A figure, not a test.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
RUNS="${RUNS:-10}"
export KUBECONFIG="$ROOT/.local-cluster/kubeconfig"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
BIN="$TARGET/release/workflow-operator"
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
LOG_TAG=bench

log "building the release operator"
cargo build -q --release -p workflow-operator
tests/cluster/cluster.sh up >&2
kubectl apply --server-side -k crds/ >/dev/null
bench_namespace "bench-reload-$$"
ns="$bench_ns"

versions=("$TARGET/plugins/pre-check.wasm" "$TARGET/test-plugins/pre-check-v2.wasm")
for i in 0 1; do
  [ -f "${versions[$i]}" ] || { log "${versions[$i]} is missing: run make plugins"; exit 1; }
  kubectl -n "$ns" create configmap pre-check --from-file=pre-check.wasm="${versions[$i]}" \
    --dry-run=client -o yaml | kubectl label --local -f - workflow.rxg456.cn/plugin=true -o yaml \
    >"$work/version-$i.yaml"
  sha256sum "${versions[$i]}" | cut -d' ' -f1 >"$work/digest-$i"
done

port="$(free_ports 1)"
start_operator_bg "$BIN" "$work/operator.log" 20 --namespace "$ns" --plugin-namespace "$ns" \
  --http-addr "127.0.0.1:$port"

now_ms() { date +%s%3N; }
served() { curl -s "http://127.0.0.1:$port/plugins" | grep -q "$1"; }
from_start=()
from_return=()
for run in $(seq 1 "$RUNS"); do
  i=$(( (run - 1) % 2 ))
  digest="$(cat "$work/digest-$i")"
  t0=$(now_ms)
  kubectl apply --server-side -f "$work/version-$i.yaml" >/dev/null
  t1=$(now_ms)
  WAIT_INTERVAL=0.005 wait_until 30 "version $i to be served" served "$digest" || exit 1
  t2=$(now_ms)
  from_start+=($((t2 - t0)))
  from_return+=($((t2 - t1)))
  log "change $run: served $((t2 - t0)) ms after kubectl apply started, $((t2 - t1)) ms after it returned"
done

stats() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {printf "%d / %d / %d ms", a[1], a[int((NR+1)/2)], a[NR]}'; }
echo
echo "plugin ConfigMap change to served (min / median / max over $RUNS changes)"
echo "  from the start of kubectl apply:  $(stats "${from_start[@]}")"
echo "  from kubectl apply's return:      $(stats "${from_return[@]}")"
echo "  operator peak RSS:                $(awk '/VmHWM/ {printf "%.1f MiB", $2/1024}' /proc/$operator_pid/status)"
