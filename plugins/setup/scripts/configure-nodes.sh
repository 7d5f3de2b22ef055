# configure-nodes: runs the node script (the runner's standard input, from a file the pod
# template mounts, typically a ConfigMap's key) on this target with the target's facts in its
# environment: WORKFLOW_TARGET_NAME, _IP and _ROLE, WORKFLOW_CLUSTER_NAME, WORKFLOW_OS_ID,
# WORKFLOW_OS_VERSION, WORKFLOW_ARCH and WORKFLOW_PACKAGE_MANAGER. Without a script (empty
# input) it only reports the facts. The script's exit code is the step's on this target.
WORKFLOW_OS_ID=unknown WORKFLOW_OS_VERSION=""
if [ -r /etc/os-release ]; then
  WORKFLOW_OS_ID="$(. /etc/os-release && echo "${ID:-unknown}")"
  WORKFLOW_OS_VERSION="$(. /etc/os-release && echo "${VERSION_ID:-}")"
fi
WORKFLOW_ARCH="$(uname -m 2>/dev/null)"
WORKFLOW_PACKAGE_MANAGER=""
for candidate in apt-get dnf yum zypper apk; do
  if command -v "$candidate" >/dev/null 2>&1; then WORKFLOW_PACKAGE_MANAGER="$candidate"; break; fi
done
export WORKFLOW_CLUSTER_NAME WORKFLOW_OS_ID WORKFLOW_OS_VERSION WORKFLOW_ARCH WORKFLOW_PACKAGE_MANAGER
echo "facts: $WORKFLOW_TARGET_NAME $WORKFLOW_TARGET_IP ${WORKFLOW_TARGET_ROLE:-} os $WORKFLOW_OS_ID ${WORKFLOW_OS_VERSION:-?} $WORKFLOW_ARCH, package manager ${WORKFLOW_PACKAGE_MANAGER:-none}"

script="$(mktemp 2>/dev/null || echo "/tmp/configure-nodes.$$")"
cat >"$script"
if [ ! -s "$script" ]; then
  rm -f "$script"
  echo "no node script given: facts only"
  exit 0
fi
chmod 0700 "$script"
# A script with a `#!` line runs with its interpreter, any other with sh.
if [ "$(head -c 2 "$script")" = "#!" ]; then "$script"; else sh "$script"; fi
status=$?
rm -f "$script"
if [ "$status" -ne 0 ]; then
  echo "the node script exited with $status"
fi
exit "$status"
