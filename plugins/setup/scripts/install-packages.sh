# install-packages: installs PACKAGES (words) with this target's own package manager (apt-get,
# dnf, yum, zypper or apk, the first found), skipping those already installed. As a user other
# than root it uses `sudo -n`. Exits 75 (try again later) when the package database is locked
# by another process, 1 on any other failure, naming the packages in its last line.
# The word lists are split on blanks and never expanded as file names.
set -f
manager=""
for candidate in apt-get dnf yum zypper apk; do
  if command -v "$candidate" >/dev/null 2>&1; then manager="$candidate"; break; fi
done
if [ -z "$PACKAGES" ]; then
  echo "package manager ${manager:-none found}; no packages asked for"
  exit 0
fi
if [ -z "$manager" ]; then
  echo "no package manager found (apt-get, dnf, yum, zypper or apk) to install$PACKAGES"
  exit 1
fi
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo -n"

installed() {
  case "$manager" in
    apt-get) dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q ' installed$' ;;
    apk) apk info -e "$1" >/dev/null 2>&1 ;;
    *) rpm -q "$1" >/dev/null 2>&1 ;;
  esac
}

missing=""
for package in $PACKAGES; do installed "$package" || missing="$missing $package"; done
if [ -z "$missing" ]; then
  echo "already installed with $manager:$(printf ' %s' $PACKAGES)"
  exit 0
fi

log="$(mktemp 2>/dev/null || echo "/tmp/install-packages.$$")"
install_missing() {
  # shellcheck disable=SC2086 # word splitting of the package list is intended
  case "$manager" in
    apt-get) DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends $missing ;;
    dnf|yum) $sudo "$manager" install -y -q $missing ;;
    zypper) $sudo zypper --non-interactive --quiet install $missing ;;
    apk) $sudo apk add --quiet $missing ;;
  esac >"$log" 2>&1
}
refresh() {
  case "$manager" in
    apt-get) $sudo apt-get update -q ;;
    apk) $sudo apk update --quiet ;;
    zypper) $sudo zypper --non-interactive --quiet refresh ;;
    *) $sudo "$manager" makecache -q ;;
  esac >>"$log" 2>&1
}
# A package the local index does not know yet is found after a refresh of the index.
if ! install_missing && ! { refresh && install_missing; }; then
  cat "$log"
  if grep -qiE 'could not get lock|lock file|is locked|waiting for .*lock' "$log"; then
    rm -f "$log"
    echo "the package database is locked by another process; trying again later"
    exit 75
  fi
  rm -f "$log"
  echo "$manager could not install$missing"
  exit 1
fi
rm -f "$log"
still=""
for package in $missing; do installed "$package" || still="$still $package"; done
if [ -n "$still" ]; then
  echo "$manager finished but these are not installed:$still"
  exit 1
fi
echo "installed with $manager:$missing"
