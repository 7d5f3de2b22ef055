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
[ "$(id -u)" = 0 ] || { echo "bench-join: needs root (target hosts, the real node)" >&2; exit 1; }

say "building the operator ($PROFILE)"
if [ "$PROFILE" = release ]; then cargo build -q --release -p workflow-operator; else cargo build -q -p workflow-operator; fi
operator="$TARGET_DIR/$PROFILE/workflow-operator"
WORKFLOW_REAL_NODE=1 tests/cluster/cluster.sh up >/dev/null
export KUBECONFIG="$ROOT/.local-cluster/kubeconfig"
install_crds >/dev/null
tests/cluster/node.sh import-image target/image/workflow-step.tar >/dev/null
kubelet="$(tests/cluster/build.sh --print-bin-dir)/kubelet"
images="$(tests/cluster/node.sh images-dir)"

work="$(mktemp -d)"
op_pid=""
cleanup() {
  [ -z "$op_pid" ] || kill "$op_pid" 2>/dev/null || true
  tests/cluster/target-hosts.sh down "$work/hosts" >/dev/null 2>&1 || true
  kubectl delete nodes -l workflow.rxg456.cn/joined-by=bench-join --wait=false >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

: >"$work/results"
for run in $(seq 1 "$RUNS"); do
  ns="bench-join-$run-$(date +%s)"
  tests/cluster/target-hosts.sh up "$work/hosts" "$HOSTS" >"$work/hosts.txt"
  # The namespace too, with the rights of deploy/join/.
  sed "s/workflow-nodes/$ns/g" deploy/join/join.yaml | kubectl apply -f - >/dev/null
  kubectl -n "$ns" create secret generic workflow-ssh --type=kubernetes.io/ssh-auth \
    --from-file=ssh-privatekey="$work/hosts/ssh-privatekey" --from-file=known_hosts="$work/hosts/known_hosts" >/dev/null
  python3 - "$work/hosts.txt" "$run" "$kubelet" "$images" >"$work/group.json" <<'PY'
import json, sys
hosts = [line.split() for line in open(sys.argv[1]) if line.strip()]
run, kubelet, images = sys.argv[2], sys.argv[3], sys.argv[4]
joiner = {"serviceAccountName": "workflow-node-joiner"}
print(json.dumps({
    "apiVersion": "workflow.rxg456.cn/v1alpha1", "kind": "WorkflowGroup",
    "metadata": {"name": "expand"},
    "spec": {
        "type": "cluster-expansion", "clusterName": "local",
        "workflowSteps": ["pre-check", "setup", "post-check"],
        "targets": [{"name": f"bench-{run}-{i + 1}", "ip": h[1], "role": "Worker"} for i, h in enumerate(hosts)],
        "params": {
            "setup": {"join": {"kubelet": kubelet, "sandboxImage": "localhost/workflow-pause:1.0",
                               "images": [images + "/pause.tar"],
                               "nodeLabels": ["workflow.rxg456.cn/joined-by=bench-join"]}},
            "post-check": {"nodeReady": True},
        },
        "podTemplate": {"nodeSelector": {"workflow.rxg456.cn/node": "real"},
                        "tolerations": [{"key": "workflow.rxg456.cn/real-node", "operator": "Exists", "effect": "NoSchedule"}]},
        "podTemplates": {"setup": joiner, "post-check": joiner},
    },
}))
PY
  "$operator" run --namespace "$ns" --plugin-dir "$TARGET_DIR/plugins" --http-addr 127.0.0.1:0 \
    >"$work/operator-$run.log" 2>&1 &
  op_pid=$!
  wait_operator_started "$work/operator-$run.log" 60 || { cat "$work/operator-$run.log" >&2; exit 1; }
  read -r u0 s0 < <(awk '{ print $14, $15 }' "/proc/$op_pid/stat")
  start=$(date +%s.%N)
  kubectl -n "$ns" apply -f "$work/group.json" >/dev/null
  phase=""
  for _ in $(seq 1 3000); do
    phase="$(kubectl -n "$ns" get wfg expand -o jsonpath='{.status.phase}')"
    case "$phase" in Completed|Failed) break ;; esac
    sleep 0.1
  done
  took="$(echo "$(date +%s.%N) - $start" | bc)"
  read -r u1 s1 < <(awk '{ print $14, $15 }' "/proc/$op_pid/stat")
  rss="$(awk '/VmHWM/ { print $2 }' "/proc/$op_pid/status")"
  [ "$phase" = Completed ] || { kubectl -n "$ns" get wfg,wf -o yaml >&2; say "run $run: the group is $phase"; exit 1; }
  kubectl -n "$ns" get wf -o json >"$work/wf-$run.json"
  echo "$run $took $(( u1 + s1 - u0 - s0 )) $(getconf CLK_TCK) $rss $work/wf-$run.json" >>"$work/results"
  kill "$op_pid"; wait "$op_pid" 2>/dev/null || true; op_pid=""
  kubectl delete nodes -l workflow.rxg456.cn/joined-by=bench-join --wait=false >/dev/null
  tests/cluster/target-hosts.sh down "$work/hosts" >/dev/null
  kubectl delete namespace "$ns" --wait=false >/dev/null
done

python3 - "$work/results" "$HOSTS" <<'PY'
import json, statistics, sys
from datetime import datetime
def t(s): return datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ").timestamp()
rows = [line.split() for line in open(sys.argv[1]) if line.strip()]
steps = {}
for row in rows:
    for wf in json.load(open(row[5]))["items"]:
        for name, d in (wf["status"].get("stepDetails") or {}).items():
            if d.get("startedAt") and d.get("finishedAt"):
                steps.setdefault(f'{wf["spec"]["type"]}/{name}', []).append(t(d["finishedAt"]) - t(d["startedAt"]))
took = [float(r[1]) for r in rows]
cpu = [int(r[2]) / int(r[3]) for r in rows]
rss = [int(r[4]) / 1024 for r in rows]
def mmm(v, unit): return f"{min(v):.1f} / {statistics.median(v):.1f} / {max(v):.1f} {unit}"
print(f"\n| {sys.argv[2]} hosts join, {len(rows)} runs | min / median / max |\n|---|---|")
print(f"| `kubectl apply` to Completed (Nodes Ready, untainted) | {mmm(took, 's')} |")
for name, v in steps.items():
    print(f"| step `{name}` (pod start to finish, whole seconds) | {mmm(v, 's')} |")
print(f"| operator CPU over the run | {mmm(cpu, 's')} |")
print(f"| operator peak RSS | {mmm(rss, 'MiB')} |")
PY
