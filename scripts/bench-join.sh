#!/usr/bin/env bash
# Joining Nodes: a cluster-expansion group (pre-check, setup with join, post-check with
# nodeReady) over HOSTS target hosts (default 3; tests/cluster/target-hosts.sh) on the local
# cluster's real node, the kubelet and images already on the hosts (the machine's, beneath their
# roots), RUNS times (default 3), fresh hosts each time. Prints the time from `kubectl apply` to
# Completed (all Nodes Ready and untainted) split by step, and the operator's CPU time and peak
# RSS over each run. The operator is the release build (PROFILE=debug for the debug one).
# Needs root.
#
#   scripts/bench-join.sh              (make bench-join)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
HOSTS="${HOSTS:-3}"
RUNS="${RUNS:-3}"
PROFILE="${PROFILE:-release}"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
[ "$(id -u)" = 0 ] || die "needs root (target hosts, the real node)"

log "building the operator ($PROFILE)"
if [ "$PROFILE" = release ]; then cargo build -q --release -p workflow-operator; else cargo build -q -p workflow-operator; fi
operator="$TARGET_DIR/$PROFILE/workflow-operator"
WORKFLOW_REAL_NODE=1 tests/cluster/cluster.sh up >/dev/null
export KUBECONFIG="$ROOT/.local-cluster/kubeconfig"
install_crds >/dev/null
tests/cluster/node.sh import-image target/image/workflow-step.tar >/dev/null
kubelet="$(tests/cluster/build.sh --print-bin-dir)/kubelet"
images="$(tests/cluster/node.sh images-dir)"

work="$(mktemp -d)"
operator_pid=""
cleanup() {
  [ -z "$operator_pid" ] || kill "$operator_pid" 2>/dev/null || true
  tests/cluster/target-hosts.sh down "$work/hosts" >/dev/null 2>&1 || true
  kubectl delete nodes -l workflow.rxg456.cn/joined-by=bench-join --wait=false >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# group_finished <namespace>: whether the group expand there is Completed or Failed; its phase
# in `phase`.
group_finished() {
  phase="$(kubectl -n "$1" get wfg expand -o jsonpath='{.status.phase}')"
  case "$phase" in Completed|Failed) return 0 ;; *) return 1 ;; esac
}

: >"$work/results"
for run in $(seq 1 "$RUNS"); do
  ns="bench-join-$run-$(date +%s)"
  tests/cluster/target-hosts.sh up "$work/hosts" "$HOSTS" >"$work/hosts.txt"
  # The namespace too, with the rights of deploy/join/.
  sed "s/workflow-nodes/$ns/g" deploy/join/join.yaml | kubectl apply -f - >/dev/null
  kubectl -n "$ns" create secret generic workflow-ssh --type=kubernetes.io/ssh-auth \
    --from-file=ssh-privatekey="$work/hosts/ssh-privatekey" --from-file=known_hosts="$work/hosts/known_hosts" >/dev/null
  python3 scripts/groups.py join --hosts "$work/hosts.txt" --run "$run" --kubelet "$kubelet" \
    --images "$images" >"$work/group.json"
  start_operator_bg "$operator" "$work/operator-$run.log" 60 --namespace "$ns" \
    --plugin-dir "$TARGET_DIR/plugins" --http-addr 127.0.0.1:0
  read -r u0 s0 < <(awk '{ print $14, $15 }' "/proc/$operator_pid/stat")
  start=$(date +%s.%N)
  kubectl -n "$ns" apply -f "$work/group.json" >/dev/null
  WAIT_INTERVAL=0.1 wait_until 300 "group expand to finish" group_finished "$ns" || true
  took="$(echo "$(date +%s.%N) - $start" | bc)"
  read -r u1 s1 < <(awk '{ print $14, $15 }' "/proc/$operator_pid/stat")
  rss="$(awk '/VmHWM/ { print $2 }' "/proc/$operator_pid/status")"
  [ "$phase" = Completed ] || { kubectl -n "$ns" get wfg,wf -o yaml >&2; log "run $run: the group is $phase"; exit 1; }
  kubectl -n "$ns" get wf -o json >"$work/wf-$run.json"
  echo "$run $took $(( u1 + s1 - u0 - s0 )) $(getconf CLK_TCK) $rss $work/wf-$run.json" >>"$work/results"
  kill "$operator_pid"; wait "$operator_pid" 2>/dev/null || true; operator_pid=""
  kubectl delete nodes -l workflow.rxg456.cn/joined-by=bench-join --wait=false >/dev/null
  tests/cluster/target-hosts.sh down "$work/hosts" >/dev/null
  kubectl delete namespace "$ns" --wait=false >/dev/null
done

python3 scripts/bench_report.py join --results "$work/results" --hosts "$HOSTS"
