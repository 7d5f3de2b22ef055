# What the scripts of this repository share (scripts/*.sh, tests/cluster/*.sh, the Makefile's
# kubectl): `source "<repo>/scripts/lib.sh"`. Sourcing it only defines; it runs nothing.
#
#   log, error, die                   messages, one format for every script
#   kubectl, kc                       the chosen client; kc on the local cluster's kubeconfig
#   free_ports, port_free, free_slash24, fill
#   wait_until                        a wait with a deadline and a message when it runs out
#   start_daemon, stop_daemons, is_running, pid_of, pid_alive, fail_start, take_lock
#                                     the local cluster's processes (cluster.sh, node.sh)
#   install_crds, wait_operator_started, start_operator_bg, bench_namespace, sample_on_hosts
#                                     what the demo and the benchmarks do on the local cluster
# shellcheck shell=bash

LIB_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# ------------------------------------------------------------------------------ messages

# log <words>: a progress line "[<LOG_TAG>] <words>" on the descriptor LOG_FD. Sourcing sets
# them to the script's name and stderr (whatever the environment says, so a script's tag is
# never its caller's); a script may set them afterwards (the cluster scripts log on stdout).
LOG_TAG="$(basename "$0" .sh)"
LOG_FD=2
log() { printf '[%s] %s\n' "${LOG_TAG}" "$*" >&"${LOG_FD}"; }

# error <words>: "<script>: error: <words>" on stderr. die: the same, then exit 1.
error() { printf '%s: error: %s\n' "$(basename "$0")" "$*" >&2; }
die() { error "$@"; exit 1; }

# ------------------------------------------------------------------------------ kubectl

# The kubectl to run: $KUBECTL if set, else a 1.34 or 1.33 client installed side by side in the
# Google Cloud SDK layout (within the supported +/-1 skew of the local cluster's 1.34 server),
# else `kubectl` on PATH. The Rust harness (workflow_e2e::kubectl_program) makes the same choice.
if [[ -z "${KUBECTL:-}" ]]; then
  KUBECTL=kubectl
  for _kubectl in /usr/lib/google-cloud-sdk/bin/kubectl.1.34 /usr/lib/google-cloud-sdk/bin/kubectl.1.33; do
    if [[ -x "${_kubectl}" ]]; then KUBECTL="${_kubectl}"; break; fi
  done
  unset _kubectl
fi

# kubectl <args>: $KUBECTL with a request timeout ($KUBECTL_REQUEST_TIMEOUT, default 60s), so a
# wedged API server fails the call instead of hanging the script. A watch meant to outlive it
# passes --request-timeout=0 (the last one given counts).
kubectl() { command "${KUBECTL}" --request-timeout="${KUBECTL_REQUEST_TIMEOUT:-60s}" "$@"; }

# kc <args>: kubectl on the local cluster's kubeconfig ($KUBECONFIG_FILE), with a short request
# timeout.
kc() { KUBECONFIG="${KUBECONFIG_FILE:?}" KUBECTL_REQUEST_TIMEOUT=10s kubectl "$@"; }

# node_ready <node>: whether that Node's Ready condition is True (kc).
node_ready() {
  [[ "$(kc get node "$1" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" == "True" ]]
}

# ------------------------------------------------------------------------------ ports, files

# free_ports [n] [address]: n (default 1) distinct free TCP ports on address (default
# 127.0.0.1), on one line.
free_ports() { python3 "${LIB_DIR}/free_ports.py" pick --count "${1:-1}" --address "${2:-127.0.0.1}"; }

# port_free <port>: whether a TCP socket can bind <port> on every address.
port_free() { python3 "${LIB_DIR}/free_ports.py" check --port "$1"; }

# free_slash24 <a.b> <start>: the third octet N of the first a.b.N.0/24, trying N from start
# (0-255, wrapping), that no route within it or address in it on this host uses yet; fails
# when there is none.
free_slash24() {
  local prefix="$1" start="$2" i n
  for (( i = 0; i < 256; i++ )); do
    n=$(( (start + i) % 256 ))
    if [[ -z "$(ip -4 route show root "${prefix}.${n}.0/24" 2>/dev/null)" ]] \
        && ! ip -4 -o addr show | grep -qF " ${prefix}.${n}."; then
      echo "${n}"
      return 0
    fi
  done
  return 1
}

# fill <template> <NAME>...: prints the template with each ${NAME} replaced by the value of the
# shell variable NAME; any other `$` stays as it is (envsubst, Debian's gettext-base).
fill() {
  local template="$1" name names="" assignments=()
  shift
  for name in "$@"; do
    names+="\${${name}} "
    assignments+=("${name}=${!name}")
  done
  env "${assignments[@]}" envsubst "${names}" <"${template}"
}

# ------------------------------------------------------------------------------ waiting

# wait_until [--watch <daemon>] <seconds> <what> <command...>: runs the command (its output
# discarded) every WAIT_INTERVAL seconds (default 0.2) until it succeeds. After <seconds>, or
# at once when <daemon> (start_daemon's name) is no longer running, says why on stderr
# ("timed out after 30s waiting for <what>") and fails.
wait_until() {
  local watch=""
  if [[ "$1" == --watch ]]; then watch="$2"; shift 2; fi
  local seconds="$1" what="$2"
  shift 2
  local deadline=$(( $(date +%s) + seconds ))
  until "$@" >/dev/null 2>&1; do
    if [[ -n "${watch}" ]] && ! is_running "${watch}"; then
      error "${watch} exited while waiting for ${what}"
      return 1
    fi
    if (( $(date +%s) >= deadline )); then
      error "timed out after ${seconds}s waiting for ${what}"
      return 1
    fi
    sleep "${WAIT_INTERVAL:-0.2}"
  done
}

# ------------------------------------------------------------------------------ daemons
# The local cluster's processes, each started by start_daemon with its pid in PIDS/<name>.pid
# and its output in LOGS/<name>.log. A script using these sets PIDS, LOGS, DAEMON_MARK (a path
# every one of its daemons' command lines names: a pid reused by another process is not ours)
# and DAEMONS (those whose logs fail_start shows).

# pid_of <name>: the pid in <name>'s pid file; fails without one.
# shellcheck disable=SC2153 # PIDS is the sourcing script's
pid_of() {
  local f="${PIDS}/$1.pid" pid
  [[ -f "${f}" ]] || return 1
  pid="$(cat "${f}" 2>/dev/null || true)"
  [[ "${pid}" =~ ^[0-9]+$ ]] || return 1
  echo "${pid}"
}

# pid_alive <pid>: whether the process exists and has not exited: our processes are
# re-parented to PID 1, which may take seconds to reap them, and a zombie still answers
# `kill -0`.
pid_alive() {
  local state
  state="$(ps -o stat= -p "$1" 2>/dev/null)" || return 1
  [[ -n "${state}" && "${state}" != Z* ]]
}

# is_running <name>: running and ours (its command line names DAEMON_MARK). While it execs
# (start_daemon's shell becoming the daemon) its command line reads empty for a moment: alive,
# not someone else's.
is_running() {
  local pid cmdline
  pid="$(pid_of "$1")" || return 1
  kill -0 "${pid}" 2>/dev/null || return 1
  cmdline="$(tr '\0' ' ' < "/proc/${pid}/cmdline" 2>/dev/null)"
  [[ -z "${cmdline}" ]] && pid_alive "${pid}" && return 0
  grep -qF "${DAEMON_MARK:?}" <<<"${cmdline}"
}

# fail_start [<words>]: a start that went wrong: the words (if any) as an error, which of
# DAEMONS are not running and the end of their logs (of all of DAEMONS with FAIL_LOGS=all: a
# node that does not get Ready is told by its kubelet's log), then exit 1.
# shellcheck disable=SC2120 # callers pass words or none
fail_start() {
  [[ $# -eq 0 ]] || error "$*"
  local name stopped
  for name in "${DAEMONS[@]}"; do
    stopped=""
    if [[ -f "${PIDS}/${name}.pid" ]] && ! is_running "${name}"; then
      stopped=1
      echo "$(basename "$0"): ${name} is not running" >&2
    fi
    if [[ -f "${LOGS}/${name}.log" && ( -n "${stopped}" || "${FAIL_LOGS:-}" == all ) ]]; then
      echo "----- last 40 lines of ${LOGS}/${name}.log -----" >&2
      tail -n 40 "${LOGS}/${name}.log" >&2
      echo "-----" >&2
    fi
  done
  echo "$(basename "$0"): logs are in ${LOGS}; run '$0 down' to clean up" >&2
  exit 1
}

# start_daemon <name> <command...>: runs it in its own session, detached from our terminal and
# without the lock descriptors (8, 9) of its caller, appending to LOGS/<name>.log; the process
# writes its own pid file. Returns once that file is there.
start_daemon() {
  local name="$1"
  shift
  local pidfile="${PIDS}/${name}.pid"
  rm -f "${pidfile}"
  setsid bash -c 'echo $$ > "$0"; exec "$@"' "${pidfile}" "$@" \
    </dev/null >>"${LOGS}/${name}.log" 2>&1 8>&- 9>&- &
  wait_until 5 "${name} to start" test -s "${pidfile}" || fail_start
}

# stop_daemons [quiet] [kill] <name>...: SIGTERM to each one running (SIGKILL with `kill`),
# SIGKILL to what is still there 15 s later; returns once all are gone, their pid files removed.
stop_daemons() {
  local quiet="" signal=TERM name pid pids=() alive
  while [[ "${1:-}" == quiet || "${1:-}" == kill ]]; do
    if [[ "$1" == quiet ]]; then quiet=1; else signal=KILL; fi
    shift
  done
  for name in "$@"; do
    if is_running "${name}"; then
      pid="$(pid_of "${name}")"
      [[ -n "${quiet}" ]] || log "stopping ${name} (pid ${pid}, SIG${signal})"
      kill "-${signal}" "${pid}" 2>/dev/null || true
      pids+=("${pid}")
    fi
  done
  local deadline=$(( $(date +%s) + 15 ))
  while :; do
    alive=()
    for pid in "${pids[@]+"${pids[@]}"}"; do
      if pid_alive "${pid}"; then alive+=("${pid}"); fi
    done
    (( ${#alive[@]} == 0 )) && break
    if (( $(date +%s) >= deadline )); then
      for pid in "${alive[@]}"; do
        log "pid ${pid} ignored TERM, sending KILL"
        kill -KILL "${pid}" 2>/dev/null || true
      done
      sleep 0.5
      break
    fi
    sleep 0.1
  done
  for name in "$@"; do rm -f "${PIDS}/${name}.pid"; done
}

# take_lock <descriptor>: one command at a time per state directory (STATE_DIR) and script: a
# lock file outside the state directory (`down` removes that), held on <descriptor> until
# exit; fails after 600 s of waiting.
take_lock() {
  local fd="$1" lock
  lock="${TMPDIR:-/tmp}/workflow-operator-$(basename "$0" .sh)-$(printf '%s' "${STATE_DIR:?}" | md5sum | cut -c1-16).lock"
  eval "exec ${fd}>\"\${lock}\""
  flock -w 600 "${fd}" || die "another $(basename "$0") is still running after 600s (lock ${lock})"
}

# built_once <dir> <bin>: prints <bin> and ends the script when it is built already; else
# takes a lock in <dir>, held until exit, so that two processes starting at once build it
# once, and looks again.
built_once() {
  local dir="$1" bin="$2"
  if [[ -x "${bin}" ]]; then echo "${bin}"; exit 0; fi
  mkdir -p "${dir}"
  exec 9>"${dir}/.lock"
  flock 9
  if [[ -x "${bin}" ]]; then echo "${bin}"; exit 0; fi
}

# need_go <what for>: Go on PATH (it may be only in /usr/local/go/bin), for builds from the Go
# module proxy with the toolchain as installed (GOTOOLCHAIN=local) and no cgo; fails naming
# what needed it.
need_go() {
  if ! command -v go >/dev/null 2>&1; then
    [[ -x /usr/local/go/bin/go ]] || die "'go' not found (need Go >= 1.24 on PATH or in /usr/local/go/bin) to build $1"
    export PATH="/usr/local/go/bin:${PATH}"
  fi
  export GOTOOLCHAIN=local
  export CGO_ENABLED=0
}

# ------------------------------------------------------------------------------ the operator

# install_crds: the CRDs of crds/ into the current cluster, waiting until they are served.
install_crds() {
  kubectl apply -k crds/
  kubectl wait --for=condition=Established --timeout=60s \
    crd/workflowgroups.workflow.rxg456.cn crd/workflows.workflow.rxg456.cn >/dev/null
}

# prime_creates <manifest>: a server-side dry run of <manifest>'s creates; nothing is created.
# The API server's first create of a kind after its CRD is created takes about 2 s (its quota
# admission adds an evaluator for the kind): a benchmark pays it here, not in what it times.
prime_creates() {
  kubectl create --dry-run=server -f "$1" >/dev/null
}

# wait_operator_started <log> <seconds>: until the operator writing <log> says its controllers
# started; fails after <seconds>.
wait_operator_started() {
  WAIT_INTERVAL=0.05 wait_until "$2" "the operator's controllers to start ($1)" \
    grep -q "controllers started" "$1"
}

# start_operator_bg <binary> <log> <seconds> <run arguments...>: `<binary> run <arguments>` in
# the background, its pid in operator_pid, returning once its controllers started; after
# <seconds> without, prints its log and exits.
start_operator_bg() {
  local bin="$1" log_file="$2" seconds="$3"
  shift 3
  "${bin}" run "$@" >"${log_file}" 2>&1 &
  operator_pid=$!
  wait_operator_started "${log_file}" "${seconds}" && return 0
  log "the operator did not start:"
  cat "${log_file}" >&2
  exit 1
}

# bench_namespace <namespace>: what a benchmark on the local cluster starts with: the namespace
# (made now), a scratch directory in `work`, and at exit the operator of start_operator_bg
# stopped, the namespace deleted (not waited for) and the scratch directory removed.
bench_namespace() {
  bench_ns="$1"
  work="$(mktemp -d)"
  operator_pid=""
  trap bench_cleanup EXIT
  kubectl create namespace "${bench_ns}" >/dev/null
}
bench_cleanup() {
  if [[ -n "${operator_pid:-}" ]]; then kill "${operator_pid}" 2>/dev/null || true; fi
  kubectl delete namespace "${bench_ns}" --wait=false >/dev/null 2>&1 || true
  rm -rf "${work}"
}

# sample_on_hosts <sample.yaml> <hosts> <name>: prints the seed sample as JSON, named <name>,
# its targets' addresses rewritten to the target hosts of <hosts> (target-hosts.sh's
# "name address" lines, in order) and its steps placed on the local cluster's real node.
sample_on_hosts() {
  kubectl create --dry-run=client -o json -f "$1" \
    | python3 "${LIB_DIR}/groups.py" on-hosts --hosts "$2" --name "$3"
}
