# What the scripts of this repository share (scripts/*.sh, tests/cluster/*.sh, the Makefile's
# kubectl): `source "<repo>/scripts/lib.sh"`. Sourcing it only defines; it runs nothing.
# shellcheck shell=bash

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
# wedged API server fails the call instead of hanging the script.
kubectl() { command "${KUBECTL}" --request-timeout="${KUBECTL_REQUEST_TIMEOUT:-60s}" "$@"; }

# say <words>: a progress line on stderr, tagged with $SAY_TAG (default: the script's name).
say() { printf '[%s] %s\n' "${SAY_TAG:-$(basename "$0" .sh)}" "$*" >&2; }

# free_ports [n] [address]: n (default 1) distinct free TCP ports on address (default
# 127.0.0.1), on one line. All are held open until all are picked, so they differ.
free_ports() {
  python3 - "${1:-1}" "${2:-127.0.0.1}" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((sys.argv[2], 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
for s in socks:
    s.close()
PY
}

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

# install_crds: the CRDs of crds/ into the current cluster, waiting until they are served.
install_crds() {
  kubectl apply -k crds/
  kubectl wait --for=condition=Established --timeout=60s \
    crd/workflowgroups.workflow.rxg456.cn crd/workflows.workflow.rxg456.cn >/dev/null
}

# wait_operator_started <log> <seconds>: until the operator writing <log> says its controllers
# started; fails after <seconds>.
wait_operator_started() {
  local log="$1" deadline=$(( $(date +%s) + $2 ))
  until grep -q "controllers started" "${log}" 2>/dev/null; do
    (( $(date +%s) < deadline )) || return 1
    sleep 0.05
  done
}

# sample_on_hosts <sample.yaml> <hosts> <name>: prints the seed sample as JSON, named <name>,
# its targets' addresses rewritten to the target hosts of <hosts> (target-hosts.sh's
# "name address" lines, in order) and its steps placed on the local cluster's real node.
sample_on_hosts() {
  kubectl create --dry-run=client -o json -f "$1" | python3 -c '
import json, sys
group = json.load(sys.stdin)
addresses = [line.split()[1] for line in open(sys.argv[1]) if line.strip()]
for target, address in zip(group["spec"]["targets"], addresses):
    target["ip"] = address
group["metadata"] = {"name": sys.argv[2]}
group["spec"]["podTemplate"] = {
    "nodeSelector": {"workflow.rxg456.cn/node": "real"},
    "tolerations": [{"key": "workflow.rxg456.cn/real-node", "operator": "Exists", "effect": "NoSchedule"}],
}
json.dump(group, sys.stdout)' "$2" "$3"
}
