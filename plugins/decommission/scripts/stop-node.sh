# stop-node: stops this machine's kubelet, its pods' containers and containerd (systemd units, or
# the supervised processes setup's join started, by their pid files in /run). With CLEAN=yes it
# also removes what the join wrote: the kubelet's credentials, configuration and state, the CNI
# configuration and the units. Exits 1 with the reason in the last line.
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo -n"
stopped=""
stop_pidfile() { # stop_pidfile NAME PIDFILE
  [ -f "$2" ] || return 0
  pid="$(cat "$2")"
  if kill -0 "$pid" 2>/dev/null; then
    $sudo kill "$pid"
    i=0
    while kill -0 "$pid" 2>/dev/null; do
      i=$((i + 1))
      [ "$i" -le 100 ] || { $sudo kill -9 "$pid" 2>/dev/null; break; }
      sleep 0.1
    done
    stopped="$stopped $1"
  fi
  $sudo rm -f "$2"
}
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
  if systemctl is-active --quiet kubelet; then $sudo systemctl disable --now kubelet >/dev/null 2>&1; stopped="$stopped kubelet"; fi
else
  stop_pidfile kubelet /run/kubelet.pid
fi
# The pods' containers, while containerd still answers.
sock=/run/containerd/containerd.sock
if $sudo ctr --address "$sock" version >/dev/null 2>&1; then
  tasks="$($sudo ctr --address "$sock" -n k8s.io tasks ls -q 2>/dev/null)"
  for task in $tasks; do $sudo ctr --address "$sock" -n k8s.io tasks kill -s KILL "$task" >/dev/null 2>&1 || true; done
  sleep 0.5
  for task in $tasks; do $sudo ctr --address "$sock" -n k8s.io tasks delete -f "$task" >/dev/null 2>&1 || true; done
  [ -z "$tasks" ] || stopped="$stopped $(echo "$tasks" | wc -w)-containers"
fi
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
  if systemctl is-active --quiet containerd; then $sudo systemctl stop containerd; stopped="$stopped containerd"; fi
else
  stop_pidfile containerd /run/containerd-workflow.pid
fi
if [ "$CLEAN" = yes ]; then
  # The pods' volumes (Secrets, tokens) are mounts under the kubelet's directory, which the
  # kubelet may have bind-mounted on itself (to share its mounts).
  for _ in 1 2 3; do
    for m in $(awk '$2 == "/var/lib/kubelet" || $2 ~ "^/var/lib/kubelet/" { print $2 }' /proc/mounts | sort -r); do
      $sudo umount "$m" 2>/dev/null || $sudo umount -l "$m" 2>/dev/null || true
    done
  done
  if ! $sudo rm -rf /etc/kubernetes /var/lib/kubelet /etc/workflow-operator/containerd.toml \
    /etc/cni/net.d/10-workflow-bridge.conflist /etc/systemd/system/kubelet.service \
    /etc/systemd/system/containerd.service.d/10-workflow.conf 2>/tmp/stop-node.log; then
    echo "could not remove the kubelet's files: $(tail -n 1 /tmp/stop-node.log)"
    exit 1
  fi
  echo "stopped:${stopped:- nothing was running}; removed the kubelet's credentials, configuration and state"
else
  echo "stopped:${stopped:- nothing was running}"
fi
