#!/usr/bin/env bash
# Local Kubernetes cluster for workflow-operator's end-to-end tests and demo.
#
#   tests/cluster/cluster.sh up       build (if needed, via build.sh) and start the cluster
#   tests/cluster/cluster.sh down     stop every process it started and remove .local-cluster/
#   tests/cluster/cluster.sh status   show the state of each component
#   tests/cluster/cluster.sh restart-apiserver [--kill]   stop kube-apiserver, start it again
#   tests/cluster/cluster.sh restart-etcd [--kill]        stop etcd, start it again (same data)
#
# Components: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok
# (fake nodes), all on 127.0.0.1 with free ports. State lives under the git-ignored
# .local-cluster/ at the repository root, or in $WORKFLOW_CLUSTER_DIR (for a second cluster):
#   kubeconfig          cluster-admin kubeconfig (client certificate)
#   logs/<component>.log, pids/<component>.pid, pki/, etcd/, ports.env
#   kwok-stages.sha256  checksums of the kwok stages (kwok/*.yaml) the running kwok loaded
# shellcheck disable=SC2034 # fill (scripts/lib.sh) reads the configuration files' variables by name
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "${HERE}/../.." && pwd)"
# shellcheck source=scripts/lib.sh
source "${REPO_ROOT}/scripts/lib.sh"
STATE_DIR="${WORKFLOW_CLUSTER_DIR:-${REPO_ROOT}/.local-cluster}"
PKI="${STATE_DIR}/pki"
LOGS="${STATE_DIR}/logs"
PIDS="${STATE_DIR}/pids"
KUBECONFIG_FILE="${STATE_DIR}/kubeconfig"
PORTS_FILE="${STATE_DIR}/ports.env"
KWOK_STAGES_FILE="${STATE_DIR}/kwok-stages.sha256"
NODE_NAME="${KWOK_NODE_NAME:-kwok-node-0}"
COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)
# kube-controller-manager's controllers: those of a kubeadm cluster that the operator, its
# install or its tests rely on (tests/cluster/README.md lists them and what is left out).
# Services get endpoints (the admission webhook's Service), PodDisruptionBudgets a status, a
# Node whose kubelet stops goes NotReady (and its pods are evicted, by taints), DaemonSets and
# StatefulSets run; bootstrap tokens are signed into cluster-info and cleaned at expiry, and
# kubelet CSRs are approved and signed by the cluster CA, as kubeadm sets them up.
KCM_CONTROLLERS="resourcequota-controller,job-controller,garbage-collector-controller,ttl-after-finished-controller,namespace-controller,serviceaccount-controller,serviceaccount-token-controller,root-ca-certificate-publisher-controller,replicaset-controller,deployment-controller,cronjob-controller,pod-garbage-collector-controller,clusterrole-aggregation-controller,endpoints-controller,endpointslice-controller,endpointslice-mirroring-controller,disruption-controller,node-lifecycle-controller,taint-eviction-controller,daemonset-controller,statefulset-controller,ttl-controller,bootstrap-signer-controller,token-cleaner-controller,certificatesigningrequest-approving-controller,certificatesigningrequest-signing-controller,certificatesigningrequest-cleaner-controller"
START_TIMEOUT="${CLUSTER_START_TIMEOUT:-120}"
# The daemons (scripts/lib.sh): ours name the state directory on their command lines.
DAEMON_MARK="${STATE_DIR}"
DAEMONS=("${COMPONENTS[@]}")
LOG_FD=1

gen_pki() {
  local advertise="$1" san=""
  [[ "${advertise}" == 127.0.0.1 ]] || san=",IP:${advertise}"
  mkdir -p "${PKI}"
  (
    cd "${PKI}"
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -sha256 \
      -keyout ca.key -out ca.crt -subj "/CN=workflow-operator-local-ca" \
      -addext "basicConstraints=critical,CA:TRUE" \
      -addext "keyUsage=critical,digitalSignature,keyCertSign,cRLSign" 2>/dev/null

    # kube-apiserver serving certificate.
    openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr \
      -subj "/CN=kube-apiserver" 2>/dev/null
    SUBJECT_ALT_NAMES="IP:127.0.0.1,IP:10.96.0.1${san},DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local" \
      fill "${HERE}/control-plane/serving.ext" SUBJECT_ALT_NAMES > apiserver.ext
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
      -days 3650 -sha256 -extfile apiserver.ext -out apiserver.crt 2>/dev/null

    # cluster-admin client certificate (group system:masters).
    openssl req -newkey rsa:2048 -nodes -keyout admin.key -out admin.csr \
      -subj "/O=system:masters/CN=workflow-admin" 2>/dev/null
    cp "${HERE}/control-plane/client.ext" client.ext
    openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
      -days 3650 -sha256 -extfile client.ext -out admin.crt 2>/dev/null

    # The apiserver's client certificate for kubelets (logs, exec); node.sh grants it access.
    openssl req -newkey rsa:2048 -nodes -keyout apiserver-kubelet-client.key \
      -out apiserver-kubelet-client.csr -subj "/CN=kube-apiserver-kubelet-client" 2>/dev/null
    openssl x509 -req -in apiserver-kubelet-client.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
      -days 3650 -sha256 -extfile client.ext -out apiserver-kubelet-client.crt 2>/dev/null

    # Service-account token signing key.
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    rm -f ./*.csr ./*.ext
    chmod 600 ./*.key
  )
}

# write_kubeconfig <port>: the cluster-admin kubeconfig, its certificates inline.
write_kubeconfig() {
  local APISERVER_PORT="$1" CA_DATA CERT_DATA KEY_DATA
  CA_DATA="$(base64 -w0 < "${PKI}/ca.crt")"
  CERT_DATA="$(base64 -w0 < "${PKI}/admin.crt")"
  KEY_DATA="$(base64 -w0 < "${PKI}/admin.key")"
  fill "${HERE}/control-plane/kubeconfig.yaml" APISERVER_PORT CA_DATA CERT_DATA KEY_DATA > "${KUBECONFIG_FILE}.tmp"
  chmod 600 "${KUBECONFIG_FILE}.tmp"
  mv "${KUBECONFIG_FILE}.tmp" "${KUBECONFIG_FILE}"
}

kwok_node_ready() { node_ready "${NODE_NAME}"; }

default_sa_exists() { kc -n default get serviceaccount default; }

readyz() { kc get --raw /readyz; }

all_healthy() {
  local c
  for c in "${COMPONENTS[@]}"; do
    is_running "${c}" || return 1
  done
  [[ -f "${KUBECONFIG_FILE}" ]] || return 1
  readyz >/dev/null 2>&1 || return 1
  kwok_node_ready
}

stop_all() {
  # Stop in reverse start order; `make demo`'s operator (pids/operator.pid, its plugin
  # directory inside the state directory) goes first, and its target hosts.
  if [[ -d "${STATE_DIR}/target-hosts" ]]; then
    "${HERE}/target-hosts.sh" down "${STATE_DIR}/target-hosts" || true
  fi
  "${HERE}/node.sh" down
  local order=(operator) i
  for (( i=${#COMPONENTS[@]}-1; i>=0; i-- )); do order+=("${COMPONENTS[$i]}"); done
  stop_daemons ${1:+"$1"} "${order[@]}"
}

cmd_down() {
  if [[ ! -d "${STATE_DIR}" ]]; then
    log "not running (no ${STATE_DIR})"
    return 0
  fi
  stop_all
  rm -rf "${STATE_DIR}"
  log "down; removed ${STATE_DIR}"
}

cmd_status() {
  local c rc=0
  if [[ ! -d "${STATE_DIR}" ]]; then
    echo "cluster: down (no ${STATE_DIR})"
    return 1
  fi
  for c in "${COMPONENTS[@]}"; do
    if is_running "${c}"; then
      printf '  %-24s running (pid %s)\n' "${c}" "$(pid_of "${c}")"
    else
      printf '  %-24s NOT running\n' "${c}"; rc=1
    fi
  done
  if [[ -f "${KUBECONFIG_FILE}" ]] && readyz >/dev/null 2>&1; then
    echo "  apiserver /readyz        ok ($(sed -n 's/^ *server: //p' "${KUBECONFIG_FILE}"))"
  else
    echo "  apiserver /readyz        NOT ok"; rc=1
  fi
  if [[ -f "${KUBECONFIG_FILE}" ]] && kwok_node_ready; then
    echo "  node ${NODE_NAME}        Ready"
  else
    echo "  node ${NODE_NAME}        NOT Ready"; rc=1
  fi
  "${HERE}/node.sh" status || rc=1
  echo "  kubeconfig               ${KUBECONFIG_FILE}"
  return "${rc}"
}

# Ports of the running cluster, as `up` picked them.
load_ports() {
  [[ -f "${PORTS_FILE}" ]] || die "no ${PORTS_FILE}: the cluster is not up (run '$0 up')"
  # shellcheck disable=SC1090
  source "${PORTS_FILE}"
}

# start_etcd <bin-dir>: etcd on ETCD_CLIENT_PORT with its data in the state directory (kept
# across restarts); returns once it is healthy.
start_etcd() {
  local bin="$1"
  log "starting etcd on 127.0.0.1:${ETCD_CLIENT_PORT}"
  start_daemon etcd "${bin}/etcd" \
    --name=default \
    --data-dir="${STATE_DIR}/etcd" \
    --listen-client-urls="http://127.0.0.1:${ETCD_CLIENT_PORT}" \
    --advertise-client-urls="http://127.0.0.1:${ETCD_CLIENT_PORT}" \
    --listen-peer-urls="http://127.0.0.1:${ETCD_PEER_PORT}" \
    --initial-advertise-peer-urls="http://127.0.0.1:${ETCD_PEER_PORT}" \
    --initial-cluster="default=http://127.0.0.1:${ETCD_PEER_PORT}" \
    --unsafe-no-fsync=true \
    --log-level=warn
  wait_until --watch etcd 30 "etcd health" \
    curl -sf --max-time 2 "http://127.0.0.1:${ETCD_CLIENT_PORT}/health" || fail_start
}

# start_apiserver <bin-dir>: kube-apiserver on APISERVER_PORT; returns once /readyz is ok.
# Certificates and the service-account keys are the state directory's, so clients and tokens
# stay valid across restarts.
#
# Clients on this host use 127.0.0.1. With a global address on the host (APISERVER_ADVERTISE),
# the server also listens there and advertises it: the `kubernetes` Service's endpoint, which
# pods on the real node reach through its kube-proxy, as in-cluster clients do in any cluster.
start_apiserver() {
  local bin="$1" advertise="${APISERVER_ADVERTISE:-127.0.0.1}" bind=127.0.0.1 reconciler=none
  if [[ "${advertise}" != 127.0.0.1 ]]; then bind=0.0.0.0 reconciler=lease; fi
  log "starting kube-apiserver on ${bind}:${APISERVER_PORT} (advertised as ${advertise})"
  start_daemon kube-apiserver "${bin}/kube-apiserver" \
    --advertise-address="${advertise}" \
    --bind-address="${bind}" \
    --secure-port="${APISERVER_PORT}" \
    --etcd-servers="http://127.0.0.1:${ETCD_CLIENT_PORT}" \
    --cert-dir="${PKI}" \
    --tls-cert-file="${PKI}/apiserver.crt" \
    --tls-private-key-file="${PKI}/apiserver.key" \
    --client-ca-file="${PKI}/ca.crt" \
    --authorization-mode=Node,RBAC \
    --enable-bootstrap-token-auth=true \
    --service-account-issuer="https://127.0.0.1:${APISERVER_PORT}" \
    --service-account-key-file="${PKI}/sa.pub" \
    --service-account-signing-key-file="${PKI}/sa.key" \
    --service-cluster-ip-range=10.96.0.0/24 \
    --endpoint-reconciler-type="${reconciler}" \
    --disable-admission-plugins=TaintNodesByCondition \
    --enable-admission-plugins=NodeRestriction,OwnerReferencesPermissionEnforcement \
    --kubelet-preferred-address-types=InternalIP,Hostname,InternalDNS,ExternalDNS,ExternalIP \
    --kubelet-client-certificate="${PKI}/apiserver-kubelet-client.crt" \
    --kubelet-client-key="${PKI}/apiserver-kubelet-client.key" \
    --allow-privileged=true \
    --profiling=false \
    --v=1
  wait_until --watch kube-apiserver "${START_TIMEOUT}" "kube-apiserver /readyz" readyz || fail_start
}

cmd_up() {
  local t0; t0=$(date +%s)
  if [[ -d "${STATE_DIR}" ]]; then
    if all_healthy; then
      log "already running and healthy (KUBECONFIG=${KUBECONFIG_FILE})"
      real_node_up
      return 0
    fi
    log "found a stale or partially running cluster in ${STATE_DIR}; cleaning up"
    stop_all quiet
    rm -rf "${STATE_DIR}"
  fi

  command -v "${KUBECTL}" >/dev/null 2>&1 || die "kubectl not found (${KUBECTL}); set KUBECTL=/path/to/kubectl"
  command -v openssl >/dev/null 2>&1 || die "openssl not found on PATH"
  command -v python3 >/dev/null 2>&1 || die "python3 not found on PATH (used to pick free ports)"
  command -v envsubst >/dev/null 2>&1 || die "envsubst not found on PATH (Debian package gettext-base; fills the configuration files)"

  "${HERE}/build.sh"
  local BIN; BIN="$("${HERE}/build.sh" --print-bin-dir)"

  mkdir -p "${STATE_DIR}" "${LOGS}" "${PIDS}" "${STATE_DIR}/etcd"
  chmod 700 "${STATE_DIR}"
  # The host's own address, where pods reach the API server (none: loopback only).
  local APISERVER_ADVERTISE
  APISERVER_ADVERTISE="$("${HERE}/node.sh" host-ip 2>/dev/null || echo 127.0.0.1)"
  gen_pki "${APISERVER_ADVERTISE}"

  local ETCD_CLIENT_PORT ETCD_PEER_PORT APISERVER_PORT KWOK_PORT
  read -r ETCD_CLIENT_PORT ETCD_PEER_PORT APISERVER_PORT KWOK_PORT <<<"$(free_ports 4)"
  printf '%s\n' "ETCD_CLIENT_PORT=${ETCD_CLIENT_PORT}" "ETCD_PEER_PORT=${ETCD_PEER_PORT}" \
    "APISERVER_PORT=${APISERVER_PORT}" "KWOK_PORT=${KWOK_PORT}" \
    "APISERVER_ADVERTISE=${APISERVER_ADVERTISE}" > "${PORTS_FILE}"
  write_kubeconfig "${APISERVER_PORT}"

  start_etcd "${BIN}"
  start_apiserver "${BIN}"

  log "starting kube-controller-manager"
  start_daemon kube-controller-manager "${BIN}/kube-controller-manager" \
    --kubeconfig="${KUBECONFIG_FILE}" \
    --authentication-kubeconfig="${KUBECONFIG_FILE}" \
    --authorization-kubeconfig="${KUBECONFIG_FILE}" \
    --bind-address=127.0.0.1 \
    --secure-port=0 \
    --leader-elect=false \
    --controllers="${KCM_CONTROLLERS}" \
    --service-account-private-key-file="${PKI}/sa.key" \
    --root-ca-file="${PKI}/ca.crt" \
    --cluster-signing-cert-file="${PKI}/ca.crt" \
    --cluster-signing-key-file="${PKI}/ca.key" \
    --use-service-account-credentials=false \
    --cluster-name=workflow-local \
    --profiling=false \
    --v=1

  log "starting kube-scheduler"
  start_daemon kube-scheduler "${BIN}/kube-scheduler" \
    --kubeconfig="${KUBECONFIG_FILE}" \
    --authentication-kubeconfig="${KUBECONFIG_FILE}" \
    --authorization-kubeconfig="${KUBECONFIG_FILE}" \
    --bind-address=127.0.0.1 \
    --secure-port=0 \
    --leader-elect=false \
    --profiling=false \
    --v=1

  log "starting kwok"
  local kwok_configs=() f
  for f in "${HERE}"/kwok/*.yaml; do
    kwok_configs+=("--config=${f}")
  done
  # kwok reads its stages only here, at start: their checksums, so that a script can tell
  # whether the running kwok knows the stages of its own checkout (scripts/bench-cluster.sh).
  (cd "${HERE}/kwok" && sha256sum -- *.yaml) > "${KWOK_STAGES_FILE}"
  start_daemon kwok "${BIN}/kwok" \
    --kubeconfig="${KUBECONFIG_FILE}" \
    --manage-all-nodes=false \
    --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --server-address="127.0.0.1:${KWOK_PORT}" \
    --node-ip=127.0.0.1 \
    --node-lease-duration-seconds=40 \
    "${kwok_configs[@]}"

  log "registering node ${NODE_NAME}"
  fill "${HERE}/control-plane/kwok-node.yaml" NODE_NAME | kc apply -f - >/dev/null \
    || fail_start "could not create node ${NODE_NAME}"
  wait_until --watch kwok "${START_TIMEOUT}" "node ${NODE_NAME} to become Ready" kwok_node_ready || fail_start
  # The apiserver runs without the TaintNodesByCondition admission plugin, so a new Node is
  # not tainted not-ready until the node lifecycle controller's first look (it taints and
  # untaints by the Ready condition from then on): the node is usable at once. Check it.
  local taints
  taints="$(kc get node "${NODE_NAME}" -o 'jsonpath={.spec.taints}')"
  [[ -z "${taints}" ]] || fail_start "node ${NODE_NAME} unexpectedly has taints: ${taints}"
  wait_until --watch kube-controller-manager "${START_TIMEOUT}" "the default ServiceAccount" default_sa_exists || fail_start

  local c
  for c in "${COMPONENTS[@]}"; do
    is_running "${c}" || fail_start "${c} exited during start-up"
  done
  real_node_up
  log "ready in $(( $(date +%s) - t0 ))s: KUBECONFIG=${KUBECONFIG_FILE}"
}

# A real node beside kwok's (tests/cluster/node.sh), when WORKFLOW_REAL_NODE=1.
real_node_up() { [[ "${WORKFLOW_REAL_NODE:-}" != 1 ]] || "${HERE}/node.sh" up || fail_start "the real node did not start"; }

# cmd_restart <component> <start function> [--kill]: stops one control-plane process by its
# pid file (SIGTERM, or SIGKILL as a crash would with --kill) and starts it again with the same
# flags, ports and data; the other processes keep running.
cmd_restart() {
  local c="$1" starter="$2" how=""
  case "${3:-}" in
    "") ;;
    --kill) how=kill ;;
    *) die "unknown option ${3} (restart-* takes only --kill)" ;;
  esac
  [[ -d "${STATE_DIR}" ]] || die "not running (no ${STATE_DIR})"
  is_running "${c}" || die "${c} is not running; '$0 up' starts the cluster afresh"
  load_ports
  local BIN; BIN="$("${HERE}/build.sh" --print-bin-dir)"
  local t0; t0=$(date +%s%N)
  stop_daemons ${how:+"${how}"} "${c}"
  "${starter}" "${BIN}"
  # After etcd the apiserver reconnects on its own: the restart is over once it serves again.
  wait_until --watch kube-apiserver "${START_TIMEOUT}" "kube-apiserver /readyz" readyz || fail_start
  log "${c} restarted in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
}

# Serialise concurrent up/down/restarts (e.g. two `cargo test` runs starting at once) on
# descriptor 9; node.sh, which cluster.sh calls while holding it, locks on 8.

case "${1:-}" in
  up) take_lock 9; cmd_up ;;
  down) take_lock 9; cmd_down ;;
  status) cmd_status ;;
  restart-apiserver) take_lock 9; cmd_restart kube-apiserver start_apiserver "${2:-}" ;;
  restart-etcd) take_lock 9; cmd_restart etcd start_etcd "${2:-}" ;;
  *) echo "usage: $0 up|down|status|restart-apiserver [--kill]|restart-etcd [--kill]" >&2; exit 2 ;;
esac
