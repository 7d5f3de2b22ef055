#!/usr/bin/env bash
# Target hosts for steps that act on machines over SSH: each a network namespace of its own,
# reached from this machine (and from pods on the real node, through its routing) over a veth
# pair, running a real OpenSSH server (Debian's openssh-server) with its own host key and its
# own filesystem root. Nothing is contacted outside them: groups in tests and the demo name
# these hosts as their targets.
#
#   tests/cluster/target-hosts.sh up DIR COUNT      start COUNT hosts (prints "name address" lines)
#   tests/cluster/target-hosts.sh down DIR          stop them, remove their namespaces and links
#   tests/cluster/target-hosts.sh stop DIR N        stop host N's sshd (a host that is down)
#   tests/cluster/target-hosts.sh start DIR N       start host N again (or resume it when hung)
#   tests/cluster/target-hosts.sh hang DIR N        host N accepts connections but never answers
#   tests/cluster/target-hosts.sh exec DIR N CMD... run CMD in host N (its network, its root),
#                                                   as root, with CMD's exit code
#   tests/cluster/target-hosts.sh status DIR        "name address: sshd running|hung|down" lines
#   tests/cluster/target-hosts.sh only-from DIR N M host N takes SSH (port 22) from host M's
#                                                   address only, anyone else gets a TCP reset
#                                                   (M is then N's jump host); an iptables rule
#                                                   in N's network namespace, gone with `down`
#                                                   (iptables is installed when missing)
#
# DIR holds what a group needs to log in, as a kubernetes.io/ssh-auth Secret would:
#   ssh-privatekey, ssh-privatekey.pub   the client key (authorized for root on every host)
#   known_hosts                          every host's key, by address
#   hosts                                "name address" per host (host-1 10.250.X.6, ...)
#   apt-repo/                            a flat apt repository of one package (below)
# and per host hosts.d/<n>/ (sshd_config, host key, sshd.pid, sshd.log, fs/: its root's mount
# point). DIR's path must not have spaces, commas or colons (they would end a mount option).
#
# A host's root: its sshd runs chrooted in private mount and UTS namespaces (hostname host-N) whose / is an overlay of
# this machine's / (read-only beneath it) with its writes in a tmpfs of that namespace; /proc,
# /dev, /sys (the network namespace's) and DIR itself (at the same path, so what tests put in
# DIR is shared with this machine) are mounted in it. What a step changes on a host (a package
# installed, /etc written) is seen on that host only, never on this machine or another host;
# the mounts are seen only in the namespace. A host that is stopped loses its changes (its
# namespace and tmpfs go with its sshd): `start` gives it a fresh root. A hung host keeps them.
#
# A host can be a Node (a kubelet and containerd of its own, as setup's join starts them): the
# machine's cgroup hierarchies are mounted again in its root, /var/lib/containerd is a tmpfs
# (containerd's overlayfs snapshotter cannot stack on the overlay root), and
# /etc/default/kubelet gives its kubelet the cgroup root wft-<id>-N, made in every hierarchy.
# `stop` and `down` end every process of a host, its pods' (found by that cgroup) included, and
# `down` removes the cgroups.
#
# Packages: `up` builds into DIR/apt-repo/ the package workflow-test-marker 1.0 (Architecture
# all: /usr/share/workflow-test-marker/installed and /usr/bin/workflow-test-marker, which prints
# "workflow-test-marker 1.0") and a flat repository of it, and every host's apt uses only that
# one ("deb [trusted=yes] file:DIR/apt-repo ./"), so `apt-get update && apt-get install -y
# workflow-test-marker` works on a host with no network.
#
# Addresses: a free 10.250.X.0/24 per DIR, host n at 10.250.X.(4n+2)/30, this machine's side
# at 10.250.X.(4n+1); hosts reach each other through this machine, so `up` sets
# net.ipv4.ip_forward=1 when it is 0 (and says so). Needs root (namespaces, links, mounts) and
# sshd (installed when missing).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/lib.sh
source "${HERE}/../../scripts/lib.sh"

SSHD=/usr/sbin/sshd
SELF="${HERE}/$(basename "${BASH_SOURCE[0]}")"
MARKER=workflow-test-marker

cmd="${1:-}"
DIR="${2:-}"
[[ -n "${cmd}" && -n "${DIR}" ]] || die "usage: $0 up|down|start|stop|hang|exec|status|only-from DIR [COUNT|N [CMD...|M]]"
mkdir -p "${DIR}"
DIR="$(cd "${DIR}" && pwd)"
# A short id of DIR names its namespaces and links (links have at most 15 characters).
ID="$(echo -n "${DIR}" | sha256sum | cut -c1-6)"

ns_of() { echo "wft-${ID}-$1"; }
link_of() { echo "wft${ID}h$1"; }
count() { [[ -f "${DIR}/hosts" ]] && wc -l <"${DIR}/hosts" || echo 0; }

# host_number N: fails unless N is a host of DIR.
host_number() {
  [[ "$1" =~ ^[0-9]+$ && -f "${DIR}/hosts.d/$1/sshd_config" ]] || die "no host $1 in ${DIR}"
}

# read_state PID: the state letter of PID (R, S, T for stopped, Z, ...) into STATE, "" when
# there is no such process.
read_state() {
  local stat=""
  { read -r stat <"/proc/$1/stat"; } 2>/dev/null || true
  stat="${stat##*) }"
  STATE="${stat%% *}"
}

# sshd_pid N: the pid of host N's sshd when it is alive (running or hung); fails otherwise.
sshd_pid() {
  local pid_file="${DIR}/hosts.d/$1/sshd.pid" pid="" comm=""
  { read -r pid <"${pid_file}"; read -r comm <"/proc/${pid}/comm"; } 2>/dev/null || return 1
  [[ "${pid}" =~ ^[0-9]+$ && "${comm}" == sshd ]] || return 1
  read_state "${pid}"
  [[ -n "${STATE}" && "${STATE}" != [ZX] ]] || return 1
  echo "${pid}"
}

hung() { read_state "$1"; [[ "${STATE}" == [Tt] ]]; }

# end_processes PID...: SIGTERM (and SIGCONT, for hung ones), SIGKILL what is left after 2 s;
# returns once none is alive and their zombies are reaped (or 3 s went by).
end_processes() {
  [[ $# -gt 0 ]] || return 0
  kill -TERM "$@" 2>/dev/null || true
  kill -CONT "$@" 2>/dev/null || true
  local i pid alive zombies
  for (( i = 0; i < 500; i++ )); do
    alive=(); zombies=0
    for pid in "$@"; do
      read_state "${pid}"
      case "${STATE}" in
        "") ;;
        Z|X) zombies=$(( zombies + 1 )) ;;
        *) alive+=("${pid}") ;;
      esac
    done
    [[ ${#alive[@]} -gt 0 ]] || (( zombies > 0 && i < 300 )) || return 0
    (( i != 200 )) || kill -KILL "${alive[@]}" 2>/dev/null || true
    sleep 0.01
  done
  die "processes ${alive[*]} did not exit"
}

need_tools() {
  [[ "$(id -u)" == 0 ]] || die "needs root (network and mount namespaces)"
  local tool
  for tool in unshare nsenter chroot dpkg-deb gzip sha256sum; do
    command -v "${tool}" >/dev/null 2>&1 || die "needs ${tool} (util-linux, coreutils, dpkg, gzip)"
  done
  command -v ssh-keygen >/dev/null 2>&1 && [[ -x "${SSHD}" ]] && return
  log "installing openssh-server"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openssh-server openssh-client >/dev/null
}

# build_repo: DIR/apt-repo/, the package workflow-test-marker 1.0 and a flat repository of it
# (Packages, Packages.gz and an unsigned Release; the hosts' apt trusts it).
build_repo() (
  umask 022
  local repo="${DIR}/apt-repo" deb="${MARKER}_1.0_all.deb" stage head tail
  [[ -s "${repo}/Release" && -s "${repo}/${deb}" ]] && exit 0
  rm -rf "${repo}"
  mkdir -p "${repo}"
  stage="${repo}/.build"
  mkdir -p "${stage}/DEBIAN" "${stage}/usr/bin" "${stage}/usr/share/${MARKER}"
  echo "${MARKER} 1.0, installed by apt from the target hosts' repository" \
    >"${stage}/usr/share/${MARKER}/installed"
  printf '#!/bin/sh\necho "%s 1.0"\n' "${MARKER}" >"${stage}/usr/bin/${MARKER}"
  chmod 0755 "${stage}" "${stage}/usr/bin/${MARKER}"
  head="Package: ${MARKER}
Version: 1.0
Architecture: all
Maintainer: workflow-operator tests <tests@workflow-operator.invalid>
Installed-Size: $(du -sk --exclude=DEBIAN "${stage}" | cut -f1)"
  tail="Section: misc
Priority: optional
Description: marker package of workflow-operator's target hosts
 Installs /usr/share/${MARKER}/installed and /usr/bin/${MARKER}
 (which prints \"${MARKER} 1.0\"), so a test can tell where it was installed."
  printf '%s\n%s\n' "${head}" "${tail}" >"${stage}/DEBIAN/control"
  dpkg-deb --root-owner-group --build "${stage}" "${repo}/${deb}" >/dev/null
  rm -rf "${stage}"
  printf '%s\nFilename: ./%s\nSize: %s\nSHA256: %s\n%s\n' "${head}" "${deb}" \
    "$(stat -c %s "${repo}/${deb}")" "$(sha256sum "${repo}/${deb}" | cut -d' ' -f1)" "${tail}" \
    >"${repo}/Packages"
  gzip -9nk "${repo}/Packages"
  {
    echo "Origin: workflow-operator tests"
    echo "Label: workflow-test"
    echo "Date: $(LC_ALL=C date -Ru)"
    echo "SHA256:"
    local f
    for f in Packages Packages.gz; do
      echo " $(sha256sum "${repo}/${f}" | cut -d' ' -f1) $(stat -c %s "${repo}/${f}") ${f}"
    done
  } >"${repo}/Release"
)

cgroup_root_of() { echo "wft-${ID}-$1"; }

# This machine's cgroup hierarchies: "mount point, type, options" per line (from PID 1's view:
# `ip netns exec` hides them in ours).
machine_cgroups() {
  awk '{ for (i = 7; $i != "-"; i++) {}; if ($(i + 1) ~ /^cgroup2?$/) print $5, $(i + 1), $(i + 3) }' /proc/1/mountinfo
}

# mount_cgroups ROOT: the machine's cgroup hierarchies again under ROOT/sys/fs/cgroup (mounting
# a v1 hierarchy again attaches the same one), so a kubelet and containerd run in the host.
mount_cgroups() {
  local root="$1" point type options
  mount -t tmpfs -o mode=0755 cgroup "${root}/sys/fs/cgroup"
  while read -r point type options; do
    [[ "${point}" == /sys/fs/cgroup/* ]] || continue
    mkdir -p "${root}${point}"
    mount -t "${type}" -o "${options}" "${type}" "${root}${point}"
  done < <(machine_cgroups)
}

# make_cgroup_root N: host N's kubelet's cgroup root in every v1 hierarchy (a new cpuset cgroup
# has no CPUs or memory nodes until given its parent's).
make_cgroup_root() {
  local m dir
  for m in $(machine_cgroups | awk '$2 == "cgroup" { print $1 }'); do
    dir="${m}/$(cgroup_root_of "$1")"
    mkdir -p "${dir}"
    if [[ -f "${m}/cpuset.cpus" ]]; then
      cat "${m}/cpuset.cpus" >"${dir}/cpuset.cpus"
      cat "${m}/cpuset.mems" >"${dir}/cpuset.mems"
    fi
  done
}

# cgroup_pids [N]: every process in a cgroup of this DIR's hosts (or of host N): pods'
# containers live in network namespaces of their own, where `ip netns pids` does not see them.
cgroup_pids() {
  local m dir
  for m in $(machine_cgroups | awk '$2 == "cgroup" { print $1 }'); do
    for dir in "${m}"/wft-"${ID}"-${1:-*}; do
      [[ -d "${dir}" ]] && find "${dir}" -name cgroup.procs -exec cat {} + 2>/dev/null
    done
  done | sort -un
}

# remove_cgroups: this DIR's hosts' cgroups in every hierarchy (the kubelet makes them in the
# unified one too), deepest first; a cgroup whose last process just ended can be busy for a
# moment, so it is tried again for up to 5 s.
remove_cgroups() {
  local m dir i left
  for (( i = 0; i < 50; i++ )); do
    left=0
    for m in $(machine_cgroups | awk '{ print $1 }'); do
      for dir in "${m}"/wft-"${ID}"-*; do
        [[ -d "${dir}" ]] || continue
        find "${dir}" -depth -type d -exec rmdir {} + 2>/dev/null || true
        [[ ! -d "${dir}" ]] || left=1
      done
    done
    (( left )) || return 0
    sleep 0.1
  done
  log "cgroups left: $(compgen -G "/sys/fs/cgroup/*/wft-${ID}-*" | tr '\n' ' ')"
}

# enter_root N (the command `_root DIR N`, run by start_sshd in host N's network namespace and a
# fresh private mount namespace): mounts the host's root and execs its sshd there, chrooted.
enter_root() {
  local n="$1" h="${DIR}/hosts.d/$1" fs root d
  fs="${h}/fs"
  root="${fs}/root"
  # The tmpfs (the overlay's upper layer) and the overlay name the host, for findmnt inside it.
  mount -t tmpfs -o mode=0755 "$(ns_of "${n}")" "${fs}"
  mkdir "${fs}/upper" "${fs}/work" "${root}"
  mount -t overlay -o "lowerdir=/,upperdir=${fs}/upper,workdir=${fs}/work" "$(ns_of "${n}")" "${root}"
  # /sys is the network namespace's, as `ip netns exec` mounted it: it has no cgroups.
  for d in proc dev sys; do mount --rbind "/${d}" "${root}/${d}"; done
  mount_cgroups "${root}"
  # containerd's overlayfs snapshotter cannot stack on the overlay root.
  mkdir -p "${root}/var/lib/containerd"
  mount -t tmpfs -o mode=0711 "$(ns_of "${n}")-containerd" "${root}/var/lib/containerd"
  # Its own hostname (its own UTS namespace) and, as kubeadm's /etc/default/kubelet would say,
  # its kubelet's cgroup root, beside this machine's and the other hosts'.
  hostname "host-${n}"
  echo "host-${n}" >"${root}/etc/hostname"
  mkdir -p "${root}/etc/default"
  echo "KUBELET_EXTRA_ARGS=--cgroup-root=/$(cgroup_root_of "${n}")" >"${root}/etc/default/kubelet"
  mkdir -p "${root}${DIR}"
  mount --bind "${DIR}" "${root}${DIR}"
  # sshd's privilege separation directory, as its service would create it.
  mkdir -p "${root}/run/sshd"
  # apt: only DIR's repository (apt reads it as root: DIR may be closed to _apt).
  rm -f "${root}/etc/apt/sources.list" "${root}"/etc/apt/sources.list.d/*
  mkdir -p "${root}/etc/apt/sources.list.d" "${root}/etc/apt/apt.conf.d"
  echo "deb [trusted=yes] file:${DIR}/apt-repo ./" >"${root}/etc/apt/sources.list.d/workflow-test.list"
  echo 'APT::Sandbox::User "root";' >"${root}/etc/apt/apt.conf.d/99workflow-test-hosts"
  exec chroot "${root}" "${SSHD}" -f "${h}/sshd_config" -E "${h}/sshd.log"
}

start_sshd() {
  local n="$1" h="${DIR}/hosts.d/$1"
  rm -f "${h}/sshd.pid"
  mkdir -p "${h}/fs"
  make_cgroup_root "${n}"
  ip netns exec "$(ns_of "${n}")" unshare --mount --uts --propagation private "${SELF}" _root "${DIR}" "${n}" \
    || die "host ${n}: its root or sshd did not come up: $(tail -5 "${h}/sshd.log" 2>/dev/null)"
  WAIT_INTERVAL=0.01 wait_until 5 "sshd of host ${n}" sshd_pid "${n}" \
    || die "sshd of host ${n} did not start: $(tail -5 "${h}/sshd.log" 2>/dev/null)"
}

# start_host N: starts host N's sshd when it is down, resumes it when it is hung.
start_host() {
  local pid
  if pid="$(sshd_pid "$1")"; then
    if hung "${pid}"; then
      kill -CONT "${pid}"
      log "host-$1 resumed"
    fi
    return 0
  fi
  start_sshd "$1"
}

# stop_host N: ends host N's sshd and everything it started (a kubelet, containerd, pods).
stop_host() {
  local pid pids=() more
  if pid="$(sshd_pid "$1")"; then pids+=("${pid}"); fi
  mapfile -t more < <(ip netns pids "$(ns_of "$1")" 2>/dev/null || true; cgroup_pids "$1")
  pids+=("${more[@]}")
  end_processes "${pids[@]}"
  rm -f "${DIR}/hosts.d/$1/sshd.pid"
}

hang() {
  local pid
  pid="$(sshd_pid "$1")" || die "host $1 is down: start it first"
  kill -STOP "${pid}"
}

exec_in() {
  local n="$1" pid
  shift
  [[ $# -gt 0 ]] || die "usage: $0 exec DIR N CMD..."
  pid="$(sshd_pid "${n}")" || die "host ${n} is down: start it first"
  # Its mount and network namespaces, its root and its sshd's working directory (/ of its root).
  exec nsenter --target "${pid}" --mount --uts --net --root --wd -- "$@"
}

# only_from N M: host N takes connections to its SSH port from host M's address only.
only_from() {
  local n="$1" m="$2" from
  from="$(awk -v m="${m}" 'NR == m {print $2}' "${DIR}/hosts")"
  [[ -n "${from}" ]] || die "no address for host ${m} in ${DIR}/hosts"
  if ! command -v iptables >/dev/null 2>&1; then
    log "installing iptables"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends iptables >/dev/null
  fi
  ip netns exec "$(ns_of "${n}")" iptables -I INPUT -p tcp --dport 22 ! -s "${from}" \
    -j REJECT --reject-with tcp-reset
}

up() {
  local want="$1" have
  [[ "${want}" =~ ^[0-9]+$ && "${want}" -ge 1 && "${want}" -le 63 ]] || die "COUNT must be 1-63"
  [[ "${DIR}" =~ ^[A-Za-z0-9._/+@=-]+$ ]] || die "DIR ${DIR}: only letters, digits and ._/+@=- please"
  need_tools
  if [[ "$(cat /proc/sys/net/ipv4/ip_forward)" != 1 ]]; then
    echo 1 >/proc/sys/net/ipv4/ip_forward
    log "net.ipv4.ip_forward was 0: set it to 1, so the hosts reach each other through this machine"
  fi
  have="$(count)"
  if [[ "${have}" -gt 0 ]]; then
    [[ "${have}" == "${want}" ]] || die "${DIR} already has ${have} hosts: run down first"
    build_repo
    local n
    for (( n = 1; n <= have; n++ )); do start_host "${n}"; done
    cat "${DIR}/hosts"
    return
  fi
  build_repo
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
    HOST_IP="${host_ip}" HOST_DIR="${h}" fill "${HERE}/target-hosts/sshd_config" HOST_IP HOST_DIR DIR \
      >"${h}/sshd_config"
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
  local h n pid ns nss links l pids=() more
  for h in "${DIR}"/hosts.d/*/; do
    [[ -d "${h}" ]] || continue
    n="$(basename "${h}")"
    if pid="$(sshd_pid "${n}")"; then pids+=("${pid}"); fi
  done
  # Every namespace and link of this DIR, whatever the hosts file says, and every process in
  # those namespaces (sessions, `exec`s): with the last of a host's, its mounts go.
  nss="$(ip netns list 2>/dev/null | awk '{print $1}' | grep "^wft-${ID}-" || true)"
  for ns in ${nss}; do
    mapfile -t more < <(ip netns pids "${ns}" 2>/dev/null || true)
    pids+=("${more[@]}")
  done
  # A kubelet's pods: in the hosts' cgroups.
  mapfile -t more < <(cgroup_pids)
  pids+=("${more[@]}")
  end_processes "${pids[@]}"
  remove_cgroups
  for ns in ${nss}; do ip netns del "${ns}" 2>/dev/null || true; done
  links="$(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 | grep "^wft${ID}h" || true)"
  for l in ${links}; do ip link del "${l}" 2>/dev/null || true; done
  rm -f "${DIR}/hosts" "${DIR}/known_hosts" "${DIR}/hosts.tmp" "${DIR}/known_hosts.tmp"
  rm -rf "${DIR}/hosts.d" "${DIR}/apt-repo"
}

status() {
  local n pid
  [[ -f "${DIR}/hosts" ]] || { echo "target hosts: none in ${DIR}"; return; }
  n=0
  while read -r name address; do
    n=$(( n + 1 ))
    if ! pid="$(sshd_pid "${n}")"; then
      echo "${name} ${address}: down"
    elif hung "${pid}"; then
      echo "${name} ${address}: hung"
    else
      echo "${name} ${address}: sshd running"
    fi
  done <"${DIR}/hosts"
}

case "${cmd}" in
  up) up "${3:?usage: $0 up DIR COUNT}" ;;
  down) down ;;
  stop) host_number "${3:?usage: $0 stop DIR N}"; stop_host "$3" ;;
  start) host_number "${3:?usage: $0 start DIR N}"; start_host "$3" ;;
  hang) host_number "${3:?usage: $0 hang DIR N}"; hang "$3" ;;
  exec) host_number "${3:?usage: $0 exec DIR N CMD...}"; n="$3"; shift 3; exec_in "${n}" "$@" ;;
  status) status ;;
  only-from)
    host_number "${3:?usage: $0 only-from DIR N M}"; host_number "${4:?usage: $0 only-from DIR N M}"
    only_from "$3" "$4" ;;
  _root) enter_root "${3:?}" ;;
  *) die "unknown command ${cmd}: up, down, start, stop, hang, exec, status or only-from" ;;
esac
