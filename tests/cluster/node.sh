#!/usr/bin/env bash
# A real node for the local cluster (tests/cluster/cluster.sh), beside kwok's fake one: kubelet
# from the same pinned Kubernetes (tests/cluster/build.sh), containerd and runc from Debian's
# packages, a CNI bridge, and local images (no registry is reachable).
#
#   tests/cluster/node.sh up                  start it (after the control plane); idempotent
#   tests/cluster/node.sh down                stop it and remove everything it left on the host
#   tests/cluster/node.sh status              state of containerd, kubelet and the node
#   tests/cluster/node.sh import-image PATH   import an image archive (e.g. target/image/workflow-operator.tar)
#   tests/cluster/node.sh host-ip             the host's own address, where pods reach the host
#   tests/cluster/node.sh images-dir          where the node's image archives are (pause.tar,
#                                             busybox.tar), e.g. for target hosts joining as Nodes
#
# cluster.sh calls up (when WORKFLOW_REAL_NODE=1), down and status itself. Needs root.
#
# The node is named real-node-0, labelled workflow.rxg456.cn/node=real and tainted
# workflow.rxg456.cn/real-node=true:NoSchedule: a pod lands on it only when it tolerates the taint
# (and, to be sure to land there, selects the label). A kube-proxy of the same Kubernetes
# (iptables mode) gives its pods the `kubernetes` Service, which leads to the API server on the
# host's own address (cluster.sh advertises it), as in any cluster. Everything lives in <state dir>/node/
# (containerd's root, state and socket, runc's state, the kubelet's root, pod logs, volume
# plugins, CNI config and IPAM) except what the kernel and the kubelet put elsewhere, all of which
# `down` removes: the kubepods cgroups (under /sys/fs/cgroup/*/<cgroup root>), the CNI bridge,
# the pods' network namespaces (/run/netns), the kubelet's symlinks in /var/log/containers and
# the sysctls the kubelet and the bridge plugin set, and kube-proxy's iptables rules.
#
# kube-proxy owns the host's KUBE-* chains: one runs per host. The node of a second cluster on
# the same host runs pods, but without a kube-proxy (and so without in-cluster clients) while
# another cluster's kube-proxy runs.
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
NODE_DIR="${STATE_DIR}/node"
NODE_ENV="${NODE_DIR}/node.env"
CACHE_ROOT="${WORKFLOW_CLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/workflow-operator}"
IMAGES_DIR="${CACHE_ROOT}/node-images"
START_TIMEOUT="${CLUSTER_START_TIMEOUT:-120}"

NODE_NAME=real-node-0
NODE_LABEL="workflow.rxg456.cn/node=real"
NODE_TAINT_KEY="workflow.rxg456.cn/real-node"
NODE_TAINT="${NODE_TAINT_KEY}=true:NoSchedule"
export BUSYBOX_IMAGE="busybox:1.36"
export PAUSE_IMAGE="localhost/workflow-pause:1.0"
OPERATOR_IMAGE_ARCHIVE="${REPO_ROOT}/target/image/workflow-operator.tar"
STEP_IMAGE_ARCHIVE="${REPO_ROOT}/target/image/workflow-step.tar"
CNI_BIN_DIR=/usr/lib/cni
# Set by the kubelet (vm.overcommit_memory, kernel.panic, ...) and the bridge plugin
# (net.ipv4.ip_forward) for the whole host.
SYSCTLS=(net/ipv4/ip_forward net/ipv4/conf/all/route_localnet vm/overcommit_memory vm/panic_on_oom kernel/panic kernel/panic_on_oops
  kernel/keys/root_maxkeys kernel/keys/root_maxbytes)
# Directories the kubelet (its device plugin socket), containerd (shim sockets, network
# namespaces) and libcni (its result cache) use whatever their configuration. `down` removes
# this node's entries in them.
HOST_DIRS=(/var/lib/kubelet /var/lib/kubelet/device-plugins /var/lib/cni /var/lib/cni/results
  /var/log/containers /run/containerd /run/containerd/s /run/netns)
# Shared by the real nodes of every cluster on this host: the first `up` records the sysctls'
# values and which HOST_DIRS were missing; the `down` that leaves no kubelet running puts the
# values back and removes those directories once empty.
HOST_RECORD=/run/workflow-operator-real-node

# Names on the host that must not collide with another cluster's node: derived from the state
# directory.
ID="$(printf '%s' "${STATE_DIR}" | md5sum | cut -c1-8)"
CGROUP_ROOT="workflow-node-${ID}"
BRIDGE="wfnode${ID}"
CONTAINERD_SOCK="${NODE_DIR}/containerd/containerd.sock"
POD_LOGS="${NODE_DIR}/pod-logs"
# The daemons (scripts/lib.sh): ours name the node directory on their command lines; a failed
# start shows the end of every one's log.
DAEMON_MARK="${NODE_DIR}"
DAEMONS=(containerd kubelet kube-proxy)
FAIL_LOGS=all
LOG_FD=1

ctr_() { ctr --address "${CONTAINERD_SOCK}" "$@"; }

# ------------------------------------------------------------------------------ processes


# Whether another cluster's kubelet runs on this host (ours, stopped, may linger as a zombie).
other_kubelet_running() {
  local p
  for p in $(pgrep -x kubelet); do
    pid_alive "${p}" && return 0
  done
  return 1
}

# Pids of kube-proxies of other clusters on this host.
other_kube_proxies() {
  local p
  for p in $(pgrep -x kube-proxy); do
    pid_alive "${p}" || continue
    grep -qF "${NODE_DIR}/kube-proxy/config.yaml" "/proc/${p}/cmdline" 2>/dev/null || echo "${p}"
  done
  return 0
}

# Removes every KUBE-* chain and each rule that jumps to one, in every table of both families:
# kube-proxy --cleanup leaves the kubelet's KUBE-FIREWALL (it makes it whatever
# makeIPTablesUtilChains says).
remove_kube_chains() {
  local ipt table rule chain
  for ipt in iptables ip6tables; do
    command -v "${ipt}" >/dev/null 2>&1 || continue
    for table in $("${ipt}-save" 2>/dev/null | awk '/^\*/ { print substr($1, 2) }'); do
      while IFS= read -r rule; do
        [[ -n "${rule}" ]] || continue
        # shellcheck disable=SC2086
        "${ipt}" -t "${table}" -D ${rule#-A } 2>/dev/null || true
      done < <("${ipt}" -t "${table}" -S 2>/dev/null | grep -E '^-A [A-Z]+ .*-j KUBE-' || true)
      for chain in $("${ipt}" -t "${table}" -S 2>/dev/null | awk '/^-N KUBE-/ { print $2 }'); do
        "${ipt}" -t "${table}" -F "${chain}" 2>/dev/null || true
      done
      for chain in $("${ipt}" -t "${table}" -S 2>/dev/null | awk '/^-N KUBE-/ { print $2 }'); do
        "${ipt}" -t "${table}" -X "${chain}" 2>/dev/null || true
      done
    done
  done
}

# kube-proxy's iptables chains on the host (every family and table).
kube_proxy_chains() {
  local save
  for save in iptables-save ip6tables-save; do
    command -v "${save}" >/dev/null 2>&1 || continue
    "${save}" 2>/dev/null | awk '/^:KUBE-/ { print $1 }'
  done | sed 's/^://' | sort -u
}


# Pids of the node's daemons and containerd's shims (their command lines name the node's
# configuration or containerd's socket), whatever the pid files say.
our_processes() {
  local p
  for p in $(grep -slF -e "${CONTAINERD_SOCK}" -e "${NODE_DIR}/containerd/config.toml" \
      -e "${NODE_DIR}/kubelet/config.yaml" -e "${NODE_DIR}/kube-proxy/config.yaml" \
      /proc/[0-9]*/cmdline 2>/dev/null | cut -d/ -f3); do
    # The grep itself matched its own command line: keep only what still runs.
    pid_alive "${p}" && echo "${p}"
  done
  return 0
}

# ------------------------------------------------------------------------------ host state

# The mount points of every cgroup hierarchy (v1 controllers, named and unified).
cgroup_mounts() { awk '$3 == "cgroup" || $3 == "cgroup2" { print $2 }' /proc/self/mounts; }

# Pids in the node's cgroups (the pods' processes).
cgroup_processes() {
  local m
  for m in $(cgroup_mounts); do
    [[ -d "${m}/${CGROUP_ROOT}" ]] || continue
    find "${m}/${CGROUP_ROOT}" -name cgroup.procs -exec cat {} + 2>/dev/null
  done | sort -un
}

cgroup_dirs_left() {
  local m
  for m in $(cgroup_mounts); do
    [[ -d "${m}/${CGROUP_ROOT}" ]] && echo "${m}/${CGROUP_ROOT}"
  done
  return 0
}

# Mount points at or under $1, deepest first (mountinfo escapes blanks as octal).
mounts_under() {
  awk -v dir="$1" '{
      mp = $5; gsub(/\\040/, " ", mp)
      if (mp == dir || index(mp, dir "/") == 1) print length(mp) "\t" mp
    }' /proc/self/mountinfo | sort -rn | cut -f2- | uniq
}

# The network namespaces in /run/netns of the node's pods (containerd 1.6 pins them there
# whatever its state directory): those at the other end of a veth on the node's bridge, and
# those a process in the node's cgroups is in (matched by inode), e.g. a sandbox whose veth the
# bridge plugin has not yet attached.
pod_netns() {
  local ns_inodes f pid
  {
    ip -o link show master "${BRIDGE}" 2>/dev/null \
      | awk '{ for (i = 1; i < NF; i++) if ($i == "link-netns") print "/run/netns/" $(i + 1) }'
    ns_inodes="$(for pid in $(cgroup_processes); do stat -L -c %i "/proc/${pid}/ns/net" 2>/dev/null; done)"
    if [[ -n "${ns_inodes}" ]]; then
      for f in /run/netns/*; do
        [[ -e "${f}" ]] || continue
        # An `if`, not `&&`: a last namespace that is not a pod's (a target host's, another
        # cluster's) must not become the function's failure under `set -e`.
        if grep -qx "$(stat -L -c %i "${f}" 2>/dev/null)" <<<"${ns_inodes}"; then echo "${f}"; fi
      done
    fi
  } | sort -u
}

# The kubelet's /var/log/containers entries that point into this node's pod logs.
log_symlinks() {
  local f
  for f in /var/log/containers/*.log; do
    [[ -L "${f}" ]] || continue
    [[ "$(readlink "${f}")" == "${POD_LOGS}/"* ]] && echo "${f}"
  done
  return 0
}

# The pod sandboxes containerd ever ran for this node (their ids name libcni's cache entries).
sandbox_ids() {
  local d
  for d in "${NODE_DIR}"/containerd/root/io.containerd.grpc.v1.cri/sandboxes/*; do
    [[ -d "${d}" ]] && echo "${d##*/}"
  done
  return 0
}

# libcni's cached results for this node's sandboxes: <network>-<sandbox id>-<interface>.
cni_cache_entries() {
  local f id ids
  ids="$(sandbox_ids)"
  [[ -n "${ids}" ]] || return 0
  for f in /var/lib/cni/results/*; do
    [[ -f "${f}" ]] || continue
    for id in ${ids}; do
      [[ "${f##*/}" == *"-${id}-"* ]] && echo "${f}"
    done
  done
  return 0
}

# What down must not leave behind; prints one line per leftover.
leftovers() {
  local p
  for p in $(our_processes); do echo "process ${p}: $(tr '\0' ' ' < "/proc/${p}/cmdline" 2>/dev/null)"; done
  for p in $(cgroup_processes); do echo "process ${p} in cgroup ${CGROUP_ROOT}"; done
  mounts_under "${NODE_DIR}" | sed 's/^/mount /'
  cgroup_dirs_left | sed 's/^/cgroup /'
  ip link show "${BRIDGE}" >/dev/null 2>&1 && echo "bridge ${BRIDGE}"
  log_symlinks | sed 's/^/symlink /'
  cni_cache_entries | sed 's/^/CNI cache /'
  other_kubelet_running || [[ -n "$(other_kube_proxies)" ]] \
    || kube_proxy_chains | sed 's/^/iptables chain /'
  return 0
}

# ------------------------------------------------------------------------------ up

ensure_packages() {
  local need=()
  command -v containerd >/dev/null 2>&1 && command -v ctr >/dev/null 2>&1 || need+=(containerd)
  command -v runc >/dev/null 2>&1 || need+=(runc)
  [[ -x "${CNI_BIN_DIR}/bridge" && -x "${CNI_BIN_DIR}/host-local" && -x "${CNI_BIN_DIR}/loopback" ]] \
    || need+=(containernetworking-plugins)
  [[ -x /bin/busybox ]] || need+=(busybox-static)
  command -v umoci >/dev/null 2>&1 || need+=(umoci)
  command -v skopeo >/dev/null 2>&1 || need+=(skopeo)
  command -v musl-gcc >/dev/null 2>&1 || need+=(musl-tools)
  command -v iptables >/dev/null 2>&1 || need+=(iptables)
  command -v file >/dev/null 2>&1 || need+=(file)
  command -v envsubst >/dev/null 2>&1 || need+=(gettext-base)
  (( ${#need[@]} == 0 )) && return 0
  command -v apt-get >/dev/null 2>&1 || die "missing ${need[*]} (Debian package names): install them"
  log "installing ${need[*]}"
  apt-get update -qq
  # No init system starts containerd here (the package only ships a systemd unit): this script
  # runs its own, configured below.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
}

# The host's own address: that of the interface the default route leaves by, else the first
# global one. The node cannot use loopback: pods reach it from their network namespaces.
host_ip() {
  if [[ -n "${REAL_NODE_IP:-}" ]]; then echo "${REAL_NODE_IP}"; return; fi
  local dev ip
  dev="$(ip -4 route show default | awk '{ for (i = 1; i < NF; i++) if ($i == "dev") { print $(i + 1); exit } }')"
  if [[ -n "${dev}" ]]; then
    ip="$(ip -4 -o addr show dev "${dev}" scope global | awk '{ split($4, a, "/"); print a[1]; exit }')"
  fi
  [[ -n "${ip:-}" ]] || ip="$(ip -4 -o addr show scope global | awk '{ split($4, a, "/"); print a[1]; exit }')"
  [[ -n "${ip}" ]] || die "no global IPv4 address on this host (set REAL_NODE_IP)"
  echo "${ip}"
}

# A /24 for the pods, 10.244.N.0/24 with N from the node's id, moved on past any routed one.
pod_subnet() {
  local n
  n="$(free_slash24 10.244 $(( 16#${ID:0:2} )))" || die "no free /24 in 10.244.0.0/16 for the pods"
  echo "10.244.${n}.0/24"
}

# sign <name> <subject> [<subject alternative names>]: a key and a certificate signed by the
# cluster's CA, for a client, or for a server with those names.
sign() {
  local name="$1" subject="$2" SUBJECT_ALT_NAMES="${3:-}" dir="${NODE_DIR}/pki"
  openssl req -newkey rsa:2048 -nodes -keyout "${dir}/${name}.key" -out "${dir}/${name}.csr" \
    -subj "${subject}" 2>/dev/null
  if [[ -n "${SUBJECT_ALT_NAMES}" ]]; then
    fill "${HERE}/control-plane/serving.ext" SUBJECT_ALT_NAMES > "${dir}/${name}.ext"
  else
    cp "${HERE}/control-plane/client.ext" "${dir}/${name}.ext"
  fi
  openssl x509 -req -in "${dir}/${name}.csr" -CA "${PKI}/ca.crt" -CAkey "${PKI}/ca.key" \
    -CAcreateserial -days 3650 -sha256 -extfile "${dir}/${name}.ext" -out "${dir}/${name}.crt" 2>/dev/null
  rm -f "${dir}/${name}.csr" "${dir}/${name}.ext"
  chmod 600 "${dir}/${name}.key"
}

write_pki() {
  local ip="$1"
  mkdir -p "${NODE_DIR}/pki"
  sign kubelet-client "/O=system:nodes/CN=system:node:${NODE_NAME}"
  sign kubelet-serving "/O=system:nodes/CN=system:node:${NODE_NAME}" "IP:${ip},DNS:${NODE_NAME}"
  write_client_kubeconfig "${NODE_DIR}/kubelet/kubeconfig" "${NODE_NAME}" kubelet-client
}

# write_client_kubeconfig <path> <user> <certificate name>: a kubeconfig for the cluster's API
# server with the client certificate <certificate name> that `sign` made.
write_client_kubeconfig() {
  local path="$1" USER_NAME="$2" CERT="$3" SERVER
  SERVER="$(sed -n 's/^ *server: //p' "${KUBECONFIG_FILE}")"
  [[ -n "${SERVER}" ]] || die "no server in ${KUBECONFIG_FILE}"
  fill "${HERE}/node/kubeconfig.yaml" SERVER PKI USER_NAME NODE_DIR CERT > "${path}"
  chmod 600 "${path}"
}

# kube-proxy's identity (system:kube-proxy, bound to system:node-proxier by default) and its
# configuration: iptables mode; it leaves the host's conntrack limits and timeouts and
# route_localnet as they are, and serves health and metrics on loopback only.
write_kube_proxy_config() {
  local POD_SUBNET="$1" HEALTHZ_PORT METRICS_PORT
  mkdir -p "${NODE_DIR}/kube-proxy"
  sign kube-proxy "/CN=system:kube-proxy"
  read -r HEALTHZ_PORT METRICS_PORT <<<"$(free_ports 2)"
  write_client_kubeconfig "${NODE_DIR}/kube-proxy/kubeconfig" kube-proxy kube-proxy
  fill "${HERE}/node/kube-proxy.yaml" NODE_DIR NODE_NAME POD_SUBNET HEALTHZ_PORT METRICS_PORT \
    > "${NODE_DIR}/kube-proxy/config.yaml"
  echo "KUBE_PROXY_HEALTHZ=127.0.0.1:${HEALTHZ_PORT}" >> "${NODE_ENV}"
}

# Whether kube-proxy has written the `kubernetes` Service's rules.
kube_proxy_synced() {
  local healthz; healthz="$(sed -n 's/^KUBE_PROXY_HEALTHZ=//p' "${NODE_ENV}")"
  curl -sf --max-time 2 "http://${healthz}/healthz" >/dev/null \
    && iptables-save -t nat 2>/dev/null | grep -q 'default/kubernetes:https'
}

write_cni_config() {
  local POD_SUBNET="$1"
  mkdir -p "${NODE_DIR}/cni/net.d" "${NODE_DIR}/cni/ipam"
  # No ipMasq: pods talk to this host only, and no iptables rule is written.
  fill "${HERE}/node/cni.conflist" ID BRIDGE POD_SUBNET NODE_DIR > "${NODE_DIR}/cni/net.d/10-workflow.conflist"
}

write_containerd_config() {
  local c="${NODE_DIR}/containerd" RUNC
  RUNC="$(command -v runc)"
  mkdir -p "${c}/root" "${c}/state" "${c}/opt" "${NODE_DIR}/runc"
  fill "${HERE}/node/containerd.toml" NODE_DIR CONTAINERD_SOCK PAUSE_IMAGE CNI_BIN_DIR RUNC > "${c}/config.toml"
}

write_kubelet_config() {
  local NODE_IP="$1" KUBELET_PORT="$2" KUBELET_HEALTHZ_PORT="$3"
  mkdir -p "${NODE_DIR}/kubelet/root" "${NODE_DIR}/volume-plugins" "${POD_LOGS}"
  fill "${HERE}/node/kubelet.yaml" NODE_IP KUBELET_PORT KUBELET_HEALTHZ_PORT NODE_DIR PKI \
    CONTAINERD_SOCK CGROUP_ROOT POD_LOGS NODE_TAINT_KEY > "${NODE_DIR}/kubelet/config.yaml"
}

record_host_state() {
  mkdir -p "${HOST_RECORD}"
  local s d
  if [[ ! -f "${HOST_RECORD}/sysctls" ]]; then
    for s in "${SYSCTLS[@]}"; do
      [[ -f "/proc/sys/${s}" ]] && echo "${s}=$(cat "/proc/sys/${s}")"
    done > "${HOST_RECORD}/sysctls.tmp"
    mv "${HOST_RECORD}/sysctls.tmp" "${HOST_RECORD}/sysctls"
  fi
  for d in "${HOST_DIRS[@]}"; do
    [[ -e "${d}" ]] || echo "${d}"
  done >> "${HOST_RECORD}/dirs-created"
}

# Once no kubelet runs on the host: the sysctls as the first node found them, and none of the
# directories the nodes created (the kubelet's device plugin socket has a fixed path).
restore_host_state() {
  rm -f /var/lib/kubelet/device-plugins/kubelet.sock
  [[ -d "${HOST_RECORD}" ]] || return 0
  local line d
  if [[ -f "${HOST_RECORD}/sysctls" ]]; then
    while IFS= read -r line; do
      echo "${line#*=}" > "/proc/sys/${line%%=*}" 2>/dev/null || true
    done < "${HOST_RECORD}/sysctls"
  fi
  if [[ -f "${HOST_RECORD}/dirs-created" ]]; then
    sort -ru "${HOST_RECORD}/dirs-created" | while IFS= read -r d; do
      rmdir "${d}" 2>/dev/null || true
    done
  fi
  rm -rf "${HOST_RECORD}"
}

real_node_ready() { node_ready "${NODE_NAME}"; }

healthy() {
  [[ -f "${NODE_ENV}" ]] && is_running containerd && is_running kubelet && real_node_ready
}

import_archive() {
  local archive="$1" out
  out="$(ctr_ -n k8s.io images import "${archive}" 2>&1)" \
    || { echo "${out}" >&2; die "could not import ${archive}"; }
  log "imported ${archive##*/}: $(awk '/^unpacking/ { print $2 }' <<<"${out}" | tr '\n' ' ')"
}

cmd_up() {
  local t0; t0=$(date +%s%N)
  [[ "$(id -u)" == 0 ]] || die "the real node needs root (containers, mounts, cgroups, a bridge)"
  [[ -f "${KUBECONFIG_FILE}" && -f "${PKI}/ca.key" ]] \
    || die "no cluster in ${STATE_DIR}: start it with tests/cluster/cluster.sh up"
  [[ -f "${PKI}/apiserver-kubelet-client.crt" ]] \
    || die "the cluster in ${STATE_DIR} was started by an older cluster.sh, without what a kubelet needs: restart it (tests/cluster/cluster.sh down, then up)"
  # A unix socket's path holds at most 107 bytes; containerd adds ".ttrpc" to its own.
  (( ${#CONTAINERD_SOCK} <= 100 )) \
    || die "state directory ${STATE_DIR} is too deep for containerd's socket (${CONTAINERD_SOCK}): use a shorter WORKFLOW_CLUSTER_DIR"
  if [[ -d "${NODE_DIR}" ]]; then
    if healthy; then
      log "already running and Ready (node ${NODE_NAME})"
      return 0
    fi
    log "found a stale or partially running node in ${NODE_DIR}; cleaning up"
    cmd_down
  fi

  # A bridge of this name without its node directory was left by a node whose directory was
  # removed by hand: it holds another subnet, which the bridge plugin would refuse to change.
  if ip link show "${BRIDGE}" >/dev/null 2>&1; then
    log "removing bridge ${BRIDGE}, left by a node that was not taken down"
    ip link delete "${BRIDGE}" 2>/dev/null || true
  fi

  ensure_packages
  local bin; bin="$("${HERE}/build.sh" --print-bin-dir)"
  [[ -x "${bin}/kubelet" ]] || "${HERE}/build.sh" >&2
  [[ -x "${bin}/kubelet" ]] || die "no kubelet in ${bin}"
  "${HERE}/node/images.sh" "${IMAGES_DIR}"

  local ip port healthz_port subnet
  ip="$(host_ip)"
  port="$(free_ports 1 "${ip}")"
  healthz_port="$(free_ports 1)"
  subnet="$(pod_subnet)"
  mkdir -p "${NODE_DIR}" "${LOGS}" "${PIDS}"
  chmod 700 "${NODE_DIR}"
  record_host_state
  # What the node put on the host under which names (tests check that down removes it).
  printf '%s\n' "NODE_NAME=${NODE_NAME}" "CGROUP_ROOT=${CGROUP_ROOT}" "BRIDGE=${BRIDGE}" "NODE_IP=${ip}" \
    "KUBELET_PORT=${port}" "KUBELET_HEALTHZ_PORT=${healthz_port}" "POD_SUBNET=${subnet}" > "${NODE_ENV}"
  mkdir -p "${NODE_DIR}/kubelet"
  write_pki "${ip}"
  write_cni_config "${subnet}"
  write_containerd_config
  write_kubelet_config "${ip}" "${port}" "${healthz_port}"

  # The cgroup root the kubelet puts kubepods under must exist in every hierarchy; a new cpuset
  # cgroup has no CPUs or memory nodes until given its parent's.
  local m
  for m in $(cgroup_mounts); do
    mkdir -p "${m}/${CGROUP_ROOT}"
    if [[ -f "${m}/cpuset.cpus" ]]; then
      cat "${m}/cpuset.cpus" > "${m}/${CGROUP_ROOT}/cpuset.cpus"
      cat "${m}/cpuset.mems" > "${m}/${CGROUP_ROOT}/cpuset.mems"
    fi
  done

  # The API server reaches the kubelet as kube-apiserver-kubelet-client (cluster.sh's PKI).
  kc apply -f "${HERE}/node/kubelet-api-access.yaml" >/dev/null \
    || fail_start "could not grant the API server access to kubelets"

  log "starting containerd ($(containerd --version | awk '{ print $3 }'), runc $(runc --version | awk 'NR == 1 { print $3 }'))"
  # Any pull goes to a proxy on loopback that is not there: nothing leaves this host.
  start_daemon containerd env HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9 \
    http_proxy=http://127.0.0.1:9 https_proxy=http://127.0.0.1:9 NO_PROXY= no_proxy= \
    containerd --config "${NODE_DIR}/containerd/config.toml" --log-level warn
  wait_until --watch containerd 30 "containerd's socket" ctr_ version || fail_start
  import_archive "${IMAGES_DIR}/pause.tar"
  import_archive "${IMAGES_DIR}/busybox.tar"
  if [[ -f "${OPERATOR_IMAGE_ARCHIVE}" ]]; then import_archive "${OPERATOR_IMAGE_ARCHIVE}"; fi
  if [[ -f "${STEP_IMAGE_ARCHIVE}" ]]; then import_archive "${STEP_IMAGE_ARCHIVE}"; fi

  log "starting kubelet ${NODE_NAME} on ${ip}:${port} (pods ${subnet} on bridge ${BRIDGE})"
  local k0; k0=$(date +%s%N)
  start_daemon kubelet "${bin}/kubelet" \
    --config="${NODE_DIR}/kubelet/config.yaml" \
    --kubeconfig="${NODE_DIR}/kubelet/kubeconfig" \
    --root-dir="${NODE_DIR}/kubelet/root" \
    --cert-dir="${NODE_DIR}/pki" \
    --hostname-override="${NODE_NAME}" \
    --node-ip="${ip}" \
    --node-labels="${NODE_LABEL}" \
    --pod-infra-container-image="${PAUSE_IMAGE}" \
    --v=1
  wait_until --watch kubelet "${START_TIMEOUT}" "node ${NODE_NAME} to become Ready" real_node_ready || fail_start
  local ready_ms=$(( ($(date +%s%N) - k0) / 1000000 ))

  local taints
  taints="$(kc get node "${NODE_NAME}" -o 'jsonpath={range .spec.taints[*]}{.key}={.value}:{.effect}{"\n"}{end}')"
  grep -qxF "${NODE_TAINT}" <<<"${taints}" || fail_start "node ${NODE_NAME} lacks the taint ${NODE_TAINT}: ${taints}"
  [[ "$(kc get node "${NODE_NAME}" -o "jsonpath={.metadata.labels.workflow\.rxg456\.cn/node}")" == real ]] \
    || fail_start "node ${NODE_NAME} lacks the label ${NODE_LABEL}"
  start_kube_proxy "${bin}" "${subnet}"
  log "node ${NODE_NAME} Ready ${ready_ms} ms after the kubelet started; up in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
}

# start_kube_proxy <bin-dir> <pod subnet>: kube-proxy for the node, unless the API server
# advertises only loopback (no pod could reach it) or another cluster's kube-proxy owns the
# host's KUBE-* chains.
start_kube_proxy() {
  local bin="$1" subnet="$2" advertise others
  advertise="$(sed -n 's/^APISERVER_ADVERTISE=//p' "${STATE_DIR}/ports.env" 2>/dev/null)"
  if [[ -z "${advertise}" || "${advertise}" == 127.0.0.1 ]]; then
    log "no kube-proxy: the API server listens on loopback only (a cluster started by an older cluster.sh, or a host without a global address); pods here cannot reach it"
    return 0
  fi
  others="$(other_kube_proxies)"
  if [[ -n "${others}" ]]; then
    log "no kube-proxy: another cluster's kube-proxy (pid ${others//$'\n'/ }) owns this host's iptables chains; pods here cannot reach the API server"
    return 0
  fi
  [[ -x "${bin}/kube-proxy" ]] || "${HERE}/build.sh" >&2
  write_kube_proxy_config "${subnet}"
  log "starting kube-proxy (iptables mode, cluster CIDR ${subnet})"
  start_daemon kube-proxy "${bin}/kube-proxy" --config="${NODE_DIR}/kube-proxy/config.yaml" --v=1
  wait_until --watch kube-proxy "${START_TIMEOUT}" "kube-proxy to sync the kubernetes Service" kube_proxy_synced || fail_start
}

# ------------------------------------------------------------------------------ down

# kill_until_gone <description> <command printing pids>: SIGKILL what it prints until it prints
# nothing (10 s at most).
kill_until_gone() {
  local what="$1" lister="$2" pids deadline=$(( $(date +%s) + 10 ))
  while pids="$("${lister}")"; [[ -n "${pids}" ]]; do
    (( $(date +%s) < deadline )) || { log "${what} still running: ${pids//$'\n'/ }"; return 0; }
    # shellcheck disable=SC2086
    kill -KILL ${pids} 2>/dev/null || true
    sleep 0.2
  done
}

cmd_down() {
  if [[ ! -d "${NODE_DIR}" ]] && [[ -z "$(leftovers)" ]]; then
    return 0
  fi
  local t0; t0=$(date +%s%N)
  [[ "$(id -u)" == 0 ]] || die "stopping the real node needs root"

  # First, while every pod's processes and veth still tell where its network namespace is.
  local netns; netns="$(pod_netns)"
  local had_proxy=""
  [[ -f "${NODE_DIR}/kube-proxy/config.yaml" ]] && had_proxy=1
  stop_daemons kube-proxy
  # Its rules go with it, unless another cluster's kube-proxy owns them now.
  if [[ -n "${had_proxy}" && -z "$(other_kube_proxies)" ]]; then
    local bin; bin="$("${HERE}/build.sh" --print-bin-dir)"
    "${bin}/kube-proxy" --cleanup >>"${LOGS}/kube-proxy.log" 2>&1 || true
  fi
  stop_daemons kubelet
  # With the API server up, the Node and its pods go too: nothing is scheduled to a node that is
  # gone, and a node started again later does not find the pods of this one. Only now: a kubelet
  # still running would start tearing the pods down itself, half-way.
  if [[ -f "${KUBECONFIG_FILE}" ]] && kc get --raw /readyz >/dev/null 2>&1; then
    kc delete node "${NODE_NAME}" --ignore-not-found --wait=false >/dev/null 2>&1 || true
    kc delete pods --all-namespaces --field-selector "spec.nodeName=${NODE_NAME}" \
      --force --grace-period=0 --wait=false >/dev/null 2>&1 || true
  fi
  # Kill and delete every task through containerd, so each shim exits and removes its socket.
  if is_running containerd; then
    local ns id
    for ns in $(ctr_ namespaces ls -q 2>/dev/null); do
      for id in $(ctr_ -n "${ns}" tasks ls -q 2>/dev/null); do
        ctr_ -n "${ns}" tasks kill -a -s SIGKILL "${id}" >/dev/null 2>&1 || true
      done
      for id in $(ctr_ -n "${ns}" tasks ls -q 2>/dev/null); do
        ctr_ -n "${ns}" tasks delete -f "${id}" >/dev/null 2>&1 || true
      done
    done
  fi
  stop_daemons containerd
  kill_until_gone "containerd shims" our_processes
  kill_until_gone "pod processes" cgroup_processes

  local f
  for f in ${netns}; do
    umount "${f}" 2>/dev/null || umount -l "${f}" 2>/dev/null || true
    rm -f "${f}"
  done
  local mp
  for _ in 1 2 3; do
    while IFS= read -r mp; do
      [[ -n "${mp}" ]] || continue
      umount "${mp}" 2>/dev/null || umount -l "${mp}" 2>/dev/null || true
    done < <(mounts_under "${NODE_DIR}")
    [[ -z "$(mounts_under "${NODE_DIR}")" ]] && break
  done

  local dir
  for dir in $(cgroup_dirs_left); do
    find "${dir}" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
  ip link delete "${BRIDGE}" 2>/dev/null || true
  for f in $(log_symlinks) $(cni_cache_entries); do rm -f "${f}"; done
  if ! other_kubelet_running && [[ -z "$(other_kube_proxies)" ]]; then
    remove_kube_chains
    restore_host_state
  fi

  local left; left="$(leftovers)"
  for f in ${netns}; do
    [[ -e "${f}" ]] && left+=$'\n'"network namespace ${f}"
  done
  left="$(sed '/^$/d' <<<"${left}")"
  if [[ -n "${left}" ]]; then
    echo "node.sh: error: the real node left behind:" >&2
    echo "${left}" | sed 's/^/  /' >&2
    exit 1
  fi
  rm -rf --one-file-system "${NODE_DIR}"
  rm -f "${PIDS}/containerd.pid" "${PIDS}/kubelet.pid" "${PIDS}/kube-proxy.pid"
  log "down in $(( ($(date +%s%N) - t0) / 1000000 )) ms; removed ${NODE_DIR}"
}

# ------------------------------------------------------------------------------ status

cmd_status() {
  local c rc=0
  if [[ ! -d "${NODE_DIR}" ]]; then
    echo "  real node                not started (WORKFLOW_REAL_NODE=1 tests/cluster/cluster.sh up starts it)"
    return 0
  fi
  local daemons=(containerd kubelet)
  [[ -f "${NODE_DIR}/kube-proxy/config.yaml" ]] && daemons+=(kube-proxy)
  for c in "${daemons[@]}"; do
    if is_running "${c}"; then
      printf '  %-24s running (pid %s)\n' "${c}" "$(pid_of "${c}")"
    else
      printf '  %-24s NOT running\n' "${c}"; rc=1
    fi
  done
  if real_node_ready; then
    echo "  node ${NODE_NAME}        Ready (label ${NODE_LABEL}, taint ${NODE_TAINT})"
  else
    echo "  node ${NODE_NAME}        NOT Ready"; rc=1
  fi
  return "${rc}"
}

cmd_import_image() {
  local archive="${1:?usage: $0 import-image PATH (a docker-archive or oci-archive)}"
  [[ -f "${archive}" ]] || die "no such file: ${archive}"
  is_running containerd || die "the real node is not running (WORKFLOW_REAL_NODE=1 tests/cluster/cluster.sh up)"
  import_archive "${archive}"
}

# One node command at a time per state directory, on descriptor 8: cluster.sh holds its own
# lock (9) while it calls us.

case "${1:-}" in
  up) take_lock 8; cmd_up ;;
  down) take_lock 8; cmd_down ;;
  status) cmd_status ;;
  import-image) take_lock 8; cmd_import_image "${2:-}" ;;
  host-ip) host_ip ;;
  images-dir) echo "${IMAGES_DIR}" ;;
  *) echo "usage: $0 up|down|status|import-image PATH|host-ip|images-dir" >&2; exit 2 ;;
esac
