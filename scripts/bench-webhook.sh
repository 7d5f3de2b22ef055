#!/usr/bin/env bash
# make bench-webhook: the admission webhook's latency per review (p50/p99), with the operator
# (PROFILE=release by default; PROFILE=debug skips the release build) on the local cluster.
# The operator runs with its webhook on a loopback port and makes its certificate Secret;
# scripts/bench_webhook.py then sends COUNT (default 500) AdmissionReviews of each case over
# one kept-alive TLS connection, as the API server does. A figure, not a test.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
COUNT="${COUNT:-500}"
PROFILE="${PROFILE:-release}"
export KUBECONFIG="${KUBECONFIG_OVERRIDE:-$ROOT/.local-cluster/kubeconfig}"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
BIN="$TARGET/$PROFILE/workflow-operator"
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
LOG_TAG=bench

for t in pre-check setup post-check; do
  [ -f "$TARGET/plugins/$t.wasm" ] || { log "$TARGET/plugins/$t.wasm is missing: run make plugins"; exit 1; }
done
log "building the $PROFILE operator"
if [ "$PROFILE" = release ]; then cargo build -q --release -p workflow-operator; else cargo build -q -p workflow-operator; fi
tests/cluster/cluster.sh up >&2
install_crds >/dev/null
bench_namespace "bench-webhook-$$"
ns="$bench_ns"

read -r http_port webhook_port <<<"$(free_ports 2)"
start_operator_bg "$BIN" "$work/operator.log" 60 --namespace "$ns" --plugin-namespace "$ns" \
  --plugin-dir "$TARGET/plugins" --http-addr "127.0.0.1:$http_port" \
  --webhook-addr "127.0.0.1:$webhook_port" --webhook-config-name ""
WAIT_INTERVAL=0.1 wait_until 60 "the webhook's certificate" \
  grep -q "serving the webhook certificate" "$work/operator.log" || exit 1
kubectl -n "$ns" get secret workflow-operator-webhook-tls -o jsonpath='{.data.ca\.crt}' | base64 -d >"$work/ca.crt"

echo "admission webhook latency ($PROFILE operator, loopback, $(nproc) CPUs)"
python3 scripts/bench_webhook.py --url "https://127.0.0.1:$webhook_port/validate-workflowgroup" \
  --ca "$work/ca.crt" --count "$COUNT" --metrics "http://127.0.0.1:$http_port/metrics"
