#!/usr/bin/env bash
# make demo: the local cluster, the CRDs, the operator, and the seed's sample WorkflowGroup run
# to Completed. Leaves the cluster and the operator running; `make cluster-down` stops both.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
STATE="$ROOT/.local-cluster"
export KUBECONFIG="$STATE/kubeconfig"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
BIN="$TARGET/debug/workflow-operator"
SAMPLE="$ROOT/examples/workflowgroup-sample.yaml"
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

step() { printf '\n==> %s\n' "$*"; }

step "Starting the local cluster"
tests/cluster/cluster.sh up

step "Installing the CRDs"
install_crds

step "Starting the operator (log: .local-cluster/logs/operator.log)"
# The operator reads plugins from a directory inside .local-cluster, so `make cluster-down`
# recognises it as ours and stops it with the cluster.
mkdir -p "$STATE/plugins" "$STATE/pids" "$STATE/logs"
cp "$TARGET"/plugins/*.wasm "$STATE/plugins/"
if [ -f "$STATE/pids/operator.pid" ] && kill -0 "$(cat "$STATE/pids/operator.pid")" 2>/dev/null; then
  kill "$(cat "$STATE/pids/operator.pid")" && sleep 1
fi
port="$(free_ports 1)"
nohup "$BIN" run --plugin-dir "$STATE/plugins" --http-addr "127.0.0.1:$port" \
  >"$STATE/logs/operator.log" 2>&1 &
echo $! >"$STATE/pids/operator.pid"
for _ in $(seq 1 50); do
  curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
  sleep 0.2
done
echo "operator pid $(cat "$STATE/pids/operator.pid"), loaded plugins:"
curl -fsS "http://127.0.0.1:$port/plugins" | python3 -c 'import json,sys; [print("  %-12s %-8s sha256:%s" % (t["typeName"], t["version"], t["digest"][:12])) for t in json.load(sys.stdin)["types"]]' || true

step "Applying the seed's sample WorkflowGroup"
kubectl delete -f "$SAMPLE" --ignore-not-found --wait=true >/dev/null
start=$(date +%s.%N)
kubectl apply -f "$SAMPLE"

step "Watching it run"
last=""
for _ in $(seq 1 600); do
  line="$(kubectl get wfg workflowgroup-sample -o jsonpath='{.status.phase} {.status.progress}' 2>/dev/null || true)"
  if [ "$line" != "$last" ]; then
    printf '  %6.2fs  phase=%s\n' "$(echo "$(date +%s.%N) - $start" | bc)" "$line"
    last="$line"
  fi
  case "$line" in Completed*|Failed*) break ;; esac
  sleep 0.2
done

step "kubectl get wfg,wf,pods"
kubectl get wfg,wf,pods

cat <<EOT

Look further:
  export KUBECONFIG=$KUBECONFIG
  kubectl describe wfg workflowgroup-sample     # conditions and events
  kubectl get wf -o yaml                        # steps, stepStatus, the pinned plugin digest
  curl -s http://127.0.0.1:$port/plugins        # the loaded workflow types
  curl -s http://127.0.0.1:$port/metrics        # Prometheus metrics
  tail -f $STATE/logs/operator.log
Stop everything: make cluster-down
EOT
case "$last" in Completed*) exit 0 ;; *) echo "the group did not complete: $last" >&2; exit 1 ;; esac
