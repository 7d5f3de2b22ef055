#!/usr/bin/env bash
# Target hosts for steps that act on machines over SSH: each a network namespace of its own,
# reached from this machine (and from pods on the real node, through its routing) over a veth
# pair, running a real OpenSSH server (Debian's openssh-server) with its own host key. Nothing
# is contacted outside them: groups in tests and the demo name these hosts as their targets.
#
#   tests/cluster/target-hosts.sh up DIR COUNT   start COUNT hosts (prints "name address" lines)
#   tests/cluster/target-hosts.sh down DIR       stop them, remove their namespaces and links
#   tests/cluster/target-hosts.sh stop DIR N     stop host N's sshd (a host that is down)
#   tests/cluster/target-hosts.sh status DIR
#
# DIR holds what a group needs to log in, as a kubernetes.io/ssh-auth Secret would:
#   ssh-privatekey, ssh-privatekey.pub   the client key (authorized for root on every host)
#   known_hosts                          every host's key, by address
#   hosts                                "name address" per host (host-1 10.250.X.6, ...)
# and per host hosts/<n>/ (sshd_config, host key, sshd.pid, sshd.log).
# Addresses: a free 10.250.X.0/24 per DIR, host n at 10.250.X.(4n+2)/30, this machine's side
# at 10.250.X.(4n+1). Needs root (namespaces, links) and sshd (installed when missing).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/lib.sh"

die() { echo "target-hosts.sh: error: $*" >&2; exit 1; }
log() { echo "[target-hosts] $*" >&2; }

SSHD=/usr/sbin/sshd

cmd="${1:-}"
DIR="${2:-}"
[[ -n "${cmd}" && -n "${DIR}" ]] || die "usage: $0 up|down|stop|status DIR [COUNT|N]"
mkdir -p "${DIR}"
DIR="$(cd "${DIR}" && pwd)"
# A short id of DIR names its namespaces and links (links have at most 15 characters).
ID="$(echo -n "${DIR}" | sha256sum | cut -c1-6)"

ns_of() { echo "wft-${ID}-$1"; }
link_of() { echo "wft${ID}h$1"; }
count() { [[ -f "${DIR}/hosts" ]] && wc -l <"${DIR}/hosts" || echo 0; }


need_tools() {
  [[ "$(id -u)" == 0 ]] || die "needs root (network namespaces)"
  command -v ssh-keygen >/dev/null 2>&1 && [[ -x "${SSHD}" ]] && return
  log "installing openssh-server"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openssh-server openssh-client >/dev/null
}

start_sshd() {
  local n="$1" h="${DIR}/hosts.d/$1"
  ip netns exec "$(ns_of "${n}")" "${SSHD}" -f "${h}/sshd_config" -E "${h}/sshd.log"
  local i
  for (( i = 0; i < 100; i++ )); do
    [[ -s "${h}/sshd.pid" ]] && kill -0 "$(cat "${h}/sshd.pid")" 2>/dev/null && return
    sleep 0.05
  done
  die "sshd of host ${n} did not start: $(tail -5 "${h}/sshd.log" 2>/dev/null)"
}

stop_sshd() {
  local pid_file="${DIR}/hosts.d/$1/sshd.pid"
  [[ -s "${pid_file}" ]] || return 0
  kill "$(cat "${pid_file}")" 2>/dev/null || true
  rm -f "${pid_file}"
}

up() {
  local want="$1" have
  [[ "${want}" =~ ^[0-9]+$ && "${want}" -ge 1 && "${want}" -le 63 ]] || die "COUNT must be 1-63"
  need_tools
  have="$(count)"
  if [[ "${have}" -gt 0 ]]; then
    [[ "${have}" == "${want}" ]] || die "${DIR} already has ${have} hosts: run down first"
    local n
    for (( n = 1; n <= have; n++ )); do
      [[ -s "${DIR}/hosts.d/${n}/sshd.pid" ]] && kill -0 "$(cat "${DIR}/hosts.d/${n}/sshd.pid")" 2>/dev/null \
        || start_sshd "${n}"
    done
    cat "${DIR}/hosts"
    return
  fi
  # sshd's privilege separation directory, as its service would create it.
  mkdir -p /run/sshd
  [[ -f "${DIR}/ssh-privatekey" ]] || ssh-keygen -q -t ed25519 -N "" -C "workflow target hosts" -f "${DIR}/ssh-privatekey"
  : >"${DIR}/known_hosts.tmp"
  : >"${DIR}/hosts.tmp"
  local block n ns link h host_ip
  block="$(free_slash24 10.250 $(( 16#${ID:0:2} )))" || die "no free /24 in 10.250.0.0/16"
  for (( n = 1; n <= want; n++ )); do
    ns="$(ns_of "${n}")"; link="$(link_of "${n}")"; h="${DIR}/hosts.d/${n}"
    host_ip="10.250.${block}.$(( 4 * n + 2 ))"
    mkdir -p "${h}"
    ip netns add "${ns}"
    ip link add "${link}" type veth peer name eth0 netns "${ns}"
    ip addr add "10.250.${block}.$(( 4 * n + 1 ))/30" dev "${link}"
    ip link set "${link}" up
    ip -n "${ns}" link set lo up
    ip -n "${ns}" addr add "${host_ip}/30" dev eth0
    ip -n "${ns}" link set eth0 up
    ip -n "${ns}" route add default via "10.250.${block}.$(( 4 * n + 1 ))"
    [[ -f "${h}/host_key" ]] || ssh-keygen -q -t ed25519 -N "" -C "host-${n}" -f "${h}/host_key"
    cat >"${h}/sshd_config" <<EOF
ListenAddress ${host_ip}
Port 22
HostKey ${h}/host_key
AuthorizedKeysFile ${DIR}/ssh-privatekey.pub
PidFile ${h}/sshd.pid
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
StrictModes no
MaxStartups 200
LogLevel INFO
EOF
    start_sshd "${n}"
    echo "${host_ip} $(cut -d' ' -f1,2 "${h}/host_key.pub")" >>"${DIR}/known_hosts.tmp"
    echo "host-${n} ${host_ip}" >>"${DIR}/hosts.tmp"
  done
  mv "${DIR}/known_hosts.tmp" "${DIR}/known_hosts"
  mv "${DIR}/hosts.tmp" "${DIR}/hosts"
  log "${want} hosts in 10.250.${block}.0/24, sshd on port 22 of each"
  cat "${DIR}/hosts"
}

down() {
  local n links ns
  for h in "${DIR}"/hosts.d/*/; do
    [[ -d "${h}" ]] || continue
    n="$(basename "${h}")"
    stop_sshd "${n}"
  done
  # Every namespace and link of this DIR, whatever the hosts file says.
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^wft-${ID}-" || true); do
    ip netns pids "${ns}" 2>/dev/null | xargs -r kill 2>/dev/null || true
    ip netns del "${ns}" 2>/dev/null || true
  done
  links="$(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 | grep "^wft${ID}h" || true)"
  for l in ${links}; do ip link del "${l}" 2>/dev/null || true; done
  rm -f "${DIR}/hosts" "${DIR}/known_hosts"
  rm -rf "${DIR}/hosts.d"
}

status() {
  local n
  [[ -f "${DIR}/hosts" ]] || { echo "target hosts: none in ${DIR}"; return; }
  n=0
  while read -r name address; do
    n=$(( n + 1 ))
    if [[ -s "${DIR}/hosts.d/${n}/sshd.pid" ]] && kill -0 "$(cat "${DIR}/hosts.d/${n}/sshd.pid")" 2>/dev/null; then
      echo "${name} ${address}: sshd running"
    else
      echo "${name} ${address}: down"
    fi
  done <"${DIR}/hosts"
}

case "${cmd}" in
  up) up "${3:?usage: $0 up DIR COUNT}" ;;
  down) down ;;
  stop) stop_sshd "${3:?usage: $0 stop DIR N}" ;;
  start) start_sshd "${3:?usage: $0 start DIR N}" ;;
  status) status ;;
  *) die "unknown command ${cmd}: up, down, stop, start or status" ;;
esac
