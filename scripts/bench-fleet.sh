#!/usr/bin/env bash
# make bench-fleet: the operator (cargo profile PROFILE, default dist: the build to ship) on a fleet of machines, on the local cluster's kwok
# nodes, locks on. Two parts, each with a fresh operator in a namespace of its own:
#
#   1. rollout: one group, the seed sample on FLEET_TARGETS (default 5000) targets in waves of
#      FLEET_WAVE (default 10%) of them: from `kubectl apply` to its first step pod (the first wave's
#      locks taken) and to Completed.
#   2. shared: FLEET_GROUPS (default 50) groups of FLEET_GROUP_TARGETS (default 100) targets each,
#      drawn at random (seeded) from FLEET_MACHINES (default 1000) machines, applied at once: groups
#      sharing a machine take turns.
#
# For each: wall time, API writes by the operator (per step and by resource), its CPU and peak RSS
# (VmHWM), the most lock Leases at once (polled twice a second), the Leases left afterwards, and
# for part 2 the overlaps: two groups sharing a machine with pods at the same time, from a pod watch
# (the API server's order of events; 0 expected). A figure, not a test: nothing here fails on a slow
# run.
#
#   OPERATOR_ARGS="--lock-ranges-above 0" scripts/bench-fleet.sh   other operator flags
#   KEEP_WORK=1 RUST_LOG=info ...                                  keep the operator logs
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
FLEET_TARGETS="${FLEET_TARGETS:-5000}"
FLEET_WAVE="${FLEET_WAVE:-10%}"
FLEET_GROUPS="${FLEET_GROUPS:-50}"
FLEET_GROUP_TARGETS="${FLEET_GROUP_TARGETS:-100}"
FLEET_MACHINES="${FLEET_MACHINES:-1000}"
STATE="${WORKFLOW_CLUSTER_DIR:-$ROOT/.local-cluster}"
export KUBECONFIG="$STATE/kubeconfig"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
PROFILE="${PROFILE:-dist}"
BIN="$TARGET/$PROFILE/workflow-operator"
COMPILE_CACHE="${COMPILE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/workflow-operator/plugin-compile-cache}"
SAMPLE="$ROOT/examples/workflowgroup-sample.yaml"
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
LOG_TAG=bench-fleet

log "building the operator (cargo profile $PROFILE)"
cargo build -q --profile "$PROFILE" -p workflow-operator
tests/cluster/cluster.sh up >&2
install_crds >/dev/null
prime_creates "$SAMPLE"

work="$(mktemp -d)"
operator_pid=""
poller=""
watcher=""
cleanup() {
  [ -n "$operator_pid" ] && kill "$operator_pid" 2>/dev/null || true
  [ -n "${group_watch:-}" ] && kill "$group_watch" 2>/dev/null || true
  [ -n "$poller" ] && kill "$poller" 2>/dev/null || true
  [ -n "$watcher" ] && kill "$watcher" 2>/dev/null || true
  if [ -n "${KEEP_WORK:-}" ]; then log "kept the operator logs in $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
# shellcheck source=scripts/bench-common.sh
source scripts/bench-common.sh

lock_leases() { kubectl get leases -A -l workflow.rxg456.cn/lock --no-headers 2>/dev/null | wc -l; }

# run_part <name> <groups YAML> <groups count> <targets JSON>: applies the groups in a fresh
# namespace with a fresh operator, waits for them all to finish and prints the part's table.
run_part() {
  local part="$1" yaml="$2" count="$3" targets="$4"
  local ns
  ns="bench-fleet-$part-$(date +%s)"
  fresh_namespace "$ns"
  start_operator "$ns"
  # The most lock Leases at once, polled while the part runs (beyond those there before it, of
  # groups no operator of this run watches).
  local before
  before=$(lock_leases)
  (peak=0; while true; do n=$(($(lock_leases) - before)); [ "$n" -gt "$peak" ] && peak=$n && echo "$peak" >"$work/$part-leases-peak"; sleep 0.5; done) &
  poller=$!
  # The client itself, not the `kubectl` function: $! is then the process the kill stops.
  "$KUBECTL" -n "$ns" get pods --watch --output-watch-events -o json --request-timeout=0 >"$work/$part-watch.json" 2>/dev/null &
  watcher=$!
  local ticks_started t0 t1 t_first hwm_kib ticks
  ticks_started=$(awk '{print $14 + $15}' "/proc/$operator_pid/stat")
  t0=$(date +%s.%N)
  kubectl -n "$ns" apply --server-side -f "$yaml" >/dev/null
  first_pod() { [ -n "$(kubectl -n "$ns" get pods -o name 2>/dev/null | head -1)" ]; }
  WAIT_INTERVAL=0.05 wait_until 600 "the first step pod" first_pod
  t_first=$(date +%s.%N)
  wait_groups_finished "$ns" "$count"
  t1=$finished_at
  hwm_kib=$(awk '/VmHWM/ {print $2}' "/proc/$operator_pid/status")
  ticks=$(awk '{print $14 + $15}' "/proc/$operator_pid/stat")
  curl -fsS "http://127.0.0.1:$port/metrics" >"$work/$part-metrics.txt" || true
  sleep 1
  kill "$poller" "$watcher" 2>/dev/null || true
  wait "$poller" "$watcher" 2>/dev/null || true
  poller="" watcher=""
  local steps workflows
  steps=$(kubectl -n "$ns" get pods --no-headers | wc -l)
  workflows=$(kubectl -n "$ns" get workflows.workflow.rxg456.cn --no-headers | wc -l)
  # Given back when each group finished; any left would block the next part.
  leases_gone() { [ "$(lock_leases)" -le "$before" ]; }
  WAIT_INTERVAL=0.5 wait_until 60 "the lock Leases to be given back" leases_gone || true
  stop_operator
  python3 scripts/bench_report.py fleet --part "$part" --groups "$count" --targets "$targets" \
    --t0 "$t0" --t-first-pod "$t_first" --t1 "$t1" --rss-kib "$hwm_kib" \
    --cpu-ticks "$ticks" --cpu-ticks-started "$ticks_started" --clk-tck "$(getconf CLK_TCK)" \
    --completed "$completed" --failed "$failed" --steps "$steps" --workflows "$workflows" \
    --metrics "$work/$part-metrics.txt" --watch "$work/$part-watch.json" \
    --leases-peak "$(cat "$work/$part-leases-peak" 2>/dev/null || echo 0)" --leases-left "$(($(lock_leases) - before))"
  kubectl delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
}

python3 scripts/groups.py fleet-rollout --sample "$SAMPLE" --targets "$FLEET_TARGETS" --wave "$FLEET_WAVE" \
  --targets-out "$work/rollout-targets.json" >"$work/rollout.yaml"
run_part rollout "$work/rollout.yaml" 1 "$work/rollout-targets.json"

python3 scripts/groups.py fleet-shared --sample "$SAMPLE" --count "$FLEET_GROUPS" \
  --targets "$FLEET_GROUP_TARGETS" --machines "$FLEET_MACHINES" \
  --targets-out "$work/shared-targets.json" >"$work/shared.yaml"
run_part shared "$work/shared.yaml" "$FLEET_GROUPS" "$work/shared-targets.json"
