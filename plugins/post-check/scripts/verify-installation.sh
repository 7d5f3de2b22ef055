# verify-installation: checks that what setup promised is on this target: PACKAGES installed
# (by its package manager's database), SERVICES active (systemd, else OpenRC, else a process of
# that name), FILES present, COMMANDS on PATH. Prints what it checked, then, when something is
# missing, one last line naming all of it, and exits 1.
# The word lists are split on blanks and never expanded as file names.
set -f
problems=""
problem() { problems="${problems:+$problems; }$*"; }

package_installed() {
  if command -v dpkg-query >/dev/null 2>&1; then
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q ' installed$'
  elif command -v rpm >/dev/null 2>&1; then
    rpm -q "$1" >/dev/null 2>&1
  elif command -v apk >/dev/null 2>&1; then
    apk info -e "$1" >/dev/null 2>&1
  else
    return 2
  fi
}
service_active() {
  if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
    systemctl is-active --quiet "$1"
  elif command -v rc-service >/dev/null 2>&1; then
    rc-service "$1" status >/dev/null 2>&1
  else
    pgrep -x "$1" >/dev/null 2>&1 || pidof "$1" >/dev/null 2>&1
  fi
}

checked=0
missing=""
for package in $PACKAGES; do
  checked=$((checked + 1))
  package_installed "$package"
  case $? in
    0) ;;
    2) problem "no package database to check $package" ;;
    *) missing="$missing $package" ;;
  esac
done
[ -z "$missing" ] || problem "packages not installed:$missing"
inactive=""
for service in $SERVICES; do
  checked=$((checked + 1))
  service_active "$service" || inactive="$inactive $service"
done
[ -z "$inactive" ] || problem "services not running:$inactive"
absent=""
for file in $FILES; do
  checked=$((checked + 1))
  [ -e "$file" ] || absent="$absent $file"
done
[ -z "$absent" ] || problem "files missing:$absent"
commands=""
for cmd in $COMMANDS; do
  checked=$((checked + 1))
  command -v "$cmd" >/dev/null 2>&1 || commands="$commands $cmd"
done
[ -z "$commands" ] || problem "commands missing:$commands"

if [ -n "$problems" ]; then
  echo "$problems"
  exit 1
fi
echo "installation ok: $checked things checked"
