# join-cluster: makes this machine a Node of the cluster, as `kubeadm join` would, without kubeadm.
# Its standard input is the bootstrap kubeconfig workflow-runner --join wrote for this run (the API
# server, the cluster's CA and a short-lived bootstrap token); the runner also sets
# WORKFLOW_API_SERVER and WORKFLOW_CLUSTER_VERSION (the API server's version). The step's
# params set KUBELET, KUBERNETES_VERSION, SANDBOX_IMAGE, IMAGES, POD_SUBNET, NODE_LABELS,
# JOIN_TAINT, CLUSTER_DNS, CLUSTER_DOMAIN and BOOTSTRAP_TIMEOUT.
#
# 1. A machine whose kubelet already belongs to this cluster (same CA) is left as it is (its
#    kubelet started again if it is not running); one of another cluster is refused.
# 2. containerd, runc and the CNI plugins are installed with the package manager when missing;
#    the kubelet must be at KUBELET, on PATH, or installable as the package `kubelet`; its version
#    must be KUBERNETES_VERSION when given, else within the skew the API server allows.
# 3. It writes /etc/kubernetes/pki/ca.crt, /etc/kubernetes/bootstrap-kubelet.conf,
#    /var/lib/kubelet/config.yaml (registering with JOIN_TAINT) and a bridge CNI config, starts
#    containerd and the kubelet (systemd units where systemd runs, else supervised processes
#    with pid files in /run), imports IMAGES, and waits until the kubelet holds its client
#    certificate: then the bootstrap kubeconfig (and its token) is removed from the machine.
# The token is never printed. Exits 1 with the reason in the last line.
umask 022
started=$(date +%s)
fail() { echo "$*"; exit 1; }
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo -n"
if [ -n "$sudo" ] && ! $sudo true 2>/dev/null; then
  fail "joining needs root: log in as root or give $(id -un) passwordless sudo"
fi
name="$WORKFLOW_TARGET_NAME"
etc=/etc/kubernetes
conf="$etc/kubelet.conf"
bootstrap="$etc/bootstrap-kubelet.conf"
state=/var/lib/kubelet
systemd=no
[ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1 && systemd=yes

# The bootstrap kubeconfig, read once into a file only root can read.
$sudo mkdir -p "$etc/pki" "$state"
incoming="$(mktemp)" || fail "cannot make a temporary file"
trap 'rm -f "$incoming"' EXIT
chmod 600 "$incoming"
cat >"$incoming"
server="$(sed -n 's/^ *server: *//p' "$incoming" | head -n 1)"
ca_data="$(sed -n 's/^ *certificate-authority-data: *//p' "$incoming" | head -n 1)"
[ -n "$server" ] && [ -n "$ca_data" ] || fail "no bootstrap kubeconfig on standard input (run by workflow-runner --join)"
ca="$(echo "$ca_data" | base64 -d 2>/dev/null)" || fail "the bootstrap kubeconfig's CA is not base64"

running() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
# supervise PIDFILE LOG COMMAND ARGS...: COMMAND in a session of its own, detached from this one,
# its pid in PIDFILE, its output appended to LOG.
supervise() {
  pidfile="$1" log="$2"; shift 2
  if command -v start-stop-daemon >/dev/null 2>&1; then
    # Matched by the pid file alone: another containerd or kubelet of the same binary (another
    # node's, in a container or namespace) is not this one.
    cmd="$1"; shift
    $sudo start-stop-daemon --start --background --make-pidfile --pidfile "$pidfile" --output "$log" \
      --startas "$cmd" -- "$@" </dev/null >/dev/null 2>&1
  else
    # shellcheck disable=SC2016 # expanded by the inner shell
    $sudo setsid sh -c 'echo $$ >"$1"; log="$2"; shift 2; exec "$@" >>"$log" 2>&1' sh "$pidfile" "$log" "$@" \
      </dev/null >/dev/null 2>&1 &
  fi
}
kubelet_running() {
  if [ "$systemd" = yes ]; then systemctl is-active --quiet kubelet; else running /run/kubelet.pid; fi
}

# 1. Already a Node? (a kubeconfig of the kubelet's own and the certificate it names)
joined=no
[ -f "$conf" ] && [ -s "$state/pki/kubelet-client-current.pem" ] && joined=yes
if [ "$joined" = yes ]; then
  theirs="$($sudo sed -n 's/^ *certificate-authority-data: *//p' "$conf" | head -n 1)"
  [ -n "$theirs" ] || theirs="$($sudo sed -n 's/^ *certificate-authority: *//p' "$conf" | head -n 1 | xargs -r $sudo cat 2>/dev/null | base64 | tr -d '\n')"
  their_server="$($sudo sed -n 's/^ *server: *//p' "$conf" | head -n 1)"
  if [ "$(echo "$theirs" | base64 -d 2>/dev/null)" != "$ca" ]; then
    fail "already a Node of another cluster (its kubelet.conf names the API server $their_server with another CA): decommission it there first"
  fi
fi

# 2. What a Node needs.
manager=""
for candidate in apt-get dnf yum zypper apk; do
  if command -v "$candidate" >/dev/null 2>&1; then manager="$candidate"; break; fi
done
pkg_install() {
  [ -n "$manager" ] || return 1
  case "$manager" in
    apt-get) DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "$@" \
               || { $sudo apt-get update -q && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "$@"; } ;;
    dnf|yum) $sudo "$manager" install -y -q "$@" ;;
    zypper) $sudo zypper --non-interactive --quiet install "$@" ;;
    apk) $sudo apk add --quiet "$@" ;;
  esac >/tmp/join-cluster-install.log 2>&1
}
cni_dir=""
find_cni() {
  for d in /opt/cni/bin /usr/lib/cni /usr/libexec/cni; do
    if [ -x "$d/bridge" ] && [ -x "$d/host-local" ] && [ -x "$d/loopback" ]; then cni_dir="$d"; return 0; fi
  done
  return 1
}
need() { # need COMMAND PACKAGE
  command -v "$1" >/dev/null 2>&1 && return 0
  if pkg_install "$2" && command -v "$1" >/dev/null 2>&1; then echo "installed $2 with $manager"; return 0; fi
  fail "$1 is not installed and ${manager:-no package manager} could not install $2: $(tail -n 1 /tmp/join-cluster-install.log 2>/dev/null)"
}
need containerd containerd
need runc runc
if ! find_cni; then
  pkg_install containernetworking-plugins || true
  find_cni || fail "no CNI plugins (bridge, host-local, loopback in /opt/cni/bin or /usr/lib/cni) and ${manager:-no package manager} could not install containernetworking-plugins"
fi
kubelet="${KUBELET:-$(command -v kubelet 2>/dev/null)}"
if [ -z "$kubelet" ]; then
  for k in /usr/local/bin/kubelet /usr/bin/kubelet; do [ -x "$k" ] && kubelet="$k" && break; done
fi
if [ -z "$kubelet" ] || [ ! -x "$kubelet" ]; then
  if [ -z "$KUBELET" ] && pkg_install kubelet; then kubelet="$(command -v kubelet)"; fi
  [ -n "$kubelet" ] && [ -x "$kubelet" ] || fail "no kubelet ${KUBELET:+at $KUBELET }and ${manager:-no package manager} could not install the package kubelet: put it on the machine (setup's join.kubelet names its path)"
fi
version="$("$kubelet" --version 2>/dev/null | awk '{ print $2 }')"
[ -n "$version" ] || fail "$kubelet --version printed no version"
minor() { echo "$1" | sed -n 's/^v\{0,1\}[0-9]*\.\([0-9]*\).*/\1/p'; }
if [ -n "$KUBERNETES_VERSION" ]; then
  [ "$version" = "$KUBERNETES_VERSION" ] || fail "the kubelet is $version, the group asks for $KUBERNETES_VERSION"
elif [ -n "$WORKFLOW_CLUSTER_VERSION" ]; then
  k="$(minor "$version")"; s="$(minor "$WORKFLOW_CLUSTER_VERSION")"
  if [ -n "$k" ] && [ -n "$s" ] && { [ "$k" -gt "$s" ] || [ "$k" -lt $((s - 3)) ]; }; then
    fail "the kubelet is $version, outside what the API server $WORKFLOW_CLUSTER_VERSION allows (its minor version or up to three older)"
  fi
fi

# The API server, from here.
hostport="${server#https://}"; hostport="${hostport%%/*}"
api_host="${hostport%:*}"; api_port="${hostport##*:}"
[ "$api_port" != "$hostport" ] || api_port=443
if command -v curl >/dev/null 2>&1; then
  curl -s -o /dev/null --max-time 5 -k "$server/healthz" \
    || fail "cannot reach the API server $server from this machine (curl: exit $?)"
elif command -v bash >/dev/null 2>&1; then
  timeout 5 bash -c "exec 3<>/dev/tcp/$api_host/$api_port" 2>/dev/null \
    || fail "cannot reach the API server $server from this machine"
fi

if [ "$joined" = yes ]; then
  if kubelet_running; then
    echo "already a Node of this cluster ($name, kubelet $version running): nothing changed"
    exit 0
  fi
  echo "a Node of this cluster whose kubelet is not running: starting it again"
fi

# 3. Files.
$sudo modprobe overlay 2>/dev/null || true
$sudo modprobe br_netfilter 2>/dev/null || true
echo 1 | $sudo tee /proc/sys/net/ipv4/ip_forward >/dev/null 2>&1 || true
echo "$ca" | $sudo tee "$etc/pki/ca.crt" >/dev/null
if [ "$joined" = no ]; then
  $sudo rm -f "$conf"
  $sudo install -m 600 "$incoming" "$bootstrap"
fi
cgroup_driver=cgroupfs
[ "$systemd" = yes ] && cgroup_driver=systemd
sock=/run/containerd/containerd.sock
$sudo mkdir -p /etc/workflow-operator /etc/cni/net.d /var/lib/cni/networks /var/log/pods
snapshotter=overlayfs
[ "$(stat -f -c %T /var/lib/containerd 2>/dev/null || echo none)" = overlayfs ] && snapshotter=native
$sudo tee /etc/workflow-operator/containerd.toml >/dev/null <<EOF
# containerd for the kubelet, written by workflow-operator's setup join.
version = 2
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$SANDBOX_IMAGE"
  # A container's oom_score_adj never below containerd's own (which may lack CAP_SYS_RESOURCE).
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$cni_dir"
    conf_dir = "/etc/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "$snapshotter"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = $([ "$cgroup_driver" = systemd ] && echo true || echo false)
EOF
if [ -z "$(ls /etc/cni/net.d 2>/dev/null)" ]; then
  $sudo tee /etc/cni/net.d/10-workflow-bridge.conflist >/dev/null <<EOF
{
  "cniVersion": "1.0.0",
  "name": "workflow-bridge",
  "plugins": [
    {
      "type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
      "ipam": { "type": "host-local", "ranges": [[{ "subnet": "$POD_SUBNET" }]], "routes": [{ "dst": "0.0.0.0/0" }] }
    }
  ]
}
EOF
fi
taints=""
if [ -n "$JOIN_TAINT" ]; then
  taints="registerWithTaints:
- key: ${JOIN_TAINT%%:*}
  effect: ${JOIN_TAINT##*:}"
fi
dns=""
[ -n "$CLUSTER_DNS" ] && dns="clusterDNS: [$CLUSTER_DNS]"
$sudo tee "$state/config.yaml" >/dev/null <<EOF
# Written by workflow-operator's setup join.
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $etc/pki/ca.crt}
authorization: {mode: Webhook}
cgroupDriver: $cgroup_driver
containerRuntimeEndpoint: unix://$sock
rotateCertificates: true
readOnlyPort: 0
failSwapOn: false
clusterDomain: $CLUSTER_DOMAIN
$dns
$taints
EOF
extra=""
[ -f /etc/default/kubelet ] && extra="$(sed -n 's/^KUBELET_EXTRA_ARGS=//p' /etc/default/kubelet | tr -d '"')"
[ -f /etc/sysconfig/kubelet ] && extra="$extra $(sed -n 's/^KUBELET_EXTRA_ARGS=//p' /etc/sysconfig/kubelet | tr -d '"')"
labels=""
[ -n "$NODE_LABELS" ] && labels="--node-labels=$NODE_LABELS"
kubelet_args="--bootstrap-kubeconfig=$bootstrap --kubeconfig=$conf --config=$state/config.yaml --hostname-override=$name --node-ip=$WORKFLOW_TARGET_IP $labels $extra"

# Start containerd and the kubelet.
if [ "$systemd" = yes ]; then
  $sudo mkdir -p /etc/systemd/system/containerd.service.d
  printf '[Service]\nExecStart=\nExecStart=%s --config /etc/workflow-operator/containerd.toml\n' "$(command -v containerd)" \
    | $sudo tee /etc/systemd/system/containerd.service.d/10-workflow.conf >/dev/null
  $sudo tee /etc/systemd/system/kubelet.service >/dev/null <<EOF
[Unit]
Description=kubelet (workflow-operator setup join)
After=containerd.service
Requires=containerd.service
[Service]
ExecStart=$kubelet $kubelet_args
Restart=always
RestartSec=5
[Install]
WantedBy=multi-user.target
EOF
  $sudo systemctl daemon-reload
  $sudo systemctl enable containerd kubelet >/dev/null 2>&1
  $sudo systemctl restart containerd || fail "containerd did not start: $(systemctl status containerd 2>&1 | tail -n 1)"
else
  # No init system: supervised processes of their own session, pid files in /run.
  if ! running /run/containerd-workflow.pid; then
    supervise /run/containerd-workflow.pid /var/log/containerd.log \
      "$(command -v containerd)" --config /etc/workflow-operator/containerd.toml
  fi
fi
i=0
until $sudo ctr --address "$sock" version >/dev/null 2>&1; do
  i=$((i + 1)); [ "$i" -le 150 ] || fail "containerd did not answer on $sock in 30 s: $(tail -n 1 /var/log/containerd.log 2>/dev/null)"
  sleep 0.2
done
for image in $IMAGES; do
  [ -f "$image" ] || fail "no image archive $image on this machine"
  $sudo ctr --address "$sock" -n k8s.io images import "$image" >/dev/null 2>/tmp/join-cluster-import.log \
    || fail "could not import $image: $(tail -n 1 /tmp/join-cluster-import.log)"
done
if [ "$systemd" = yes ]; then
  $sudo systemctl restart kubelet || fail "the kubelet did not start: $(systemctl status kubelet 2>&1 | tail -n 1)"
elif ! running /run/kubelet.pid; then
  # shellcheck disable=SC2086 # the arguments are words
  supervise /run/kubelet.pid /var/log/kubelet.log "$kubelet" $kubelet_args
fi

# The kubelet's client certificate: the API server has signed its CSR.
cert="$state/pki/kubelet-client-current.pem"
# why_not: the kubelet's own words on why it has none (its certificate request's error first).
why_not() {
  log="$($sudo cat /var/log/kubelet.log 2>/dev/null; [ "$systemd" = yes ] && $sudo journalctl -u kubelet -n 200 --no-pager 2>/dev/null)"
  line="$(echo "$log" | grep -E 'certificate signing request|certificate_manager' | tail -n 1)"
  [ -n "$line" ] || line="$(echo "$log" | grep -E 'Unauthorized|x509|connection refused|no route|failed to run Kubelet|command failed' | tail -n 1)"
  err="$(echo "$line" | grep 'err="' | sed -e 's/.*err="//' -e 's/" [A-Za-z_]*=.*$//' -e 's/"$//' | cut -c1-300)"
  echo "${err:-${line:-see /var/log/kubelet.log}}"
}
# abandon: stops the kubelet this run started and removes the token from the machine.
abandon() {
  if [ "$systemd" = yes ]; then
    $sudo systemctl stop kubelet 2>/dev/null
  elif running /run/kubelet.pid; then
    $sudo kill "$(cat /run/kubelet.pid)" 2>/dev/null
    $sudo rm -f /run/kubelet.pid
  fi
  # The kubelet writes its kubeconfig before it has the certificate that file names.
  $sudo rm -f "$bootstrap" "$conf"
}
i=0
until [ -s "$cert" ]; do
  i=$((i + 1))
  if ! kubelet_running; then
    why="$(why_not)"; abandon
    fail "the kubelet exited before it had its certificate: $why"
  fi
  if [ "$i" -gt $((BOOTSTRAP_TIMEOUT * 5)) ]; then
    why="$(why_not)"; abandon
    case "$why" in *Unauthorized*) why="$why (the bootstrap token is not valid: wrong, expired or deleted)" ;; esac
    fail "the kubelet had no client certificate after ${BOOTSTRAP_TIMEOUT} s (stopped it): $why"
  fi
  sleep 0.2
done
$sudo rm -f "$bootstrap"
echo "joined as Node $name (kubelet $version, $(containerd --version | awk '{ print $3 }'), $(( $(date +%s) - started )) s)"
