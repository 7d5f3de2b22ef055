#!/usr/bin/env bash
# Installs the Debian packages that `make demo` and `make test` need, when one is missing
# (one `apt-get update`, then one install): both targets run it first, so a fresh machine needs
# no step of its own. As another user than root, or without apt-get, it names what is missing
# and how to install it, and goes on: what needs it then fails saying so (the real node and the
# target hosts need root anyway).
#
#   openssl, python3, curl, bc   the local cluster's certificates, free ports, the demo's timings
#   gettext-base                 envsubst, which fills the local cluster's configuration files
#   umoci, skopeo, musl-tools, file, busybox-static
#                                the container images (make image), built without an engine
#   containerd, runc, iptables, containernetworking-plugins
#                                the local cluster's real node (tests/cluster/node.sh)
#   openssh-server, openssh-client
#                                the target hosts' sshd, and the SSH runner's tests
#   lua5.1                       the Argo CD health checks, run by the GitOps test
#   chromium, chromium-driver    the web view's test and bench, in a real (headless) browser
#   npm                          ComponentizeJS, which builds the JavaScript workflow type's test
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

# command-or-path:package pairs.
wanted=(
  openssl:openssl python3:python3 curl:curl bc:bc envsubst:gettext-base
  umoci:umoci skopeo:skopeo musl-gcc:musl-tools file:file /bin/busybox:busybox-static
  containerd:containerd runc:runc iptables:iptables /usr/lib/cni/bridge:containernetworking-plugins
  /usr/sbin/sshd:openssh-server ssh-keygen:openssh-client
  lua5.1:lua5.1
  chromium:chromium chromedriver:chromium-driver
  npm:npm
)
missing=()
for pair in "${wanted[@]}"; do
  tool="${pair%%:*}" package="${pair#*:}"
  if [[ "${tool}" == /* ]]; then [[ -x "${tool}" ]] && continue; else command -v "${tool}" >/dev/null 2>&1 && continue; fi
  [[ " ${missing[*]} " == *" ${package} "* ]] || missing+=("${package}")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
  log "missing ${missing[*]} (Debian package names): install them, e.g. sudo apt-get install ${missing[*]}"
  exit 0
fi
log "installing ${missing[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
