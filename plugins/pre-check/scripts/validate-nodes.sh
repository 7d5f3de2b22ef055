# validate-nodes: checks what the pre-check's params ask of this target. Set above this line:
# OS_FAMILIES, MIN_OS_VERSION, DISK_PATH, MIN_DISK_MIB, MIN_MEMORY_MIB, REQUIRED_COMMANDS,
# MAX_CLOCK_SKEW_SECONDS. Prints the facts it found, then, when something is wrong, one last
# line naming every problem, and exits 1.
# The word lists are split on blanks and never expanded as file names.
set -f
problems=""
problem() { problems="${problems:+$problems; }$*"; }

# "1.10" >= "1.9": dotted numeric comparison (non-numeric parts count as 0).
version_at_least() {
  awk -v have="$1" -v want="$2" 'BEGIN {
    n = split(have, h, "."); m = split(want, w, "."); if (m > n) n = m
    for (i = 1; i <= n; i++) { a = h[i] + 0; b = w[i] + 0; if (a > b) exit 0; if (a < b) exit 1 }
    exit 0 }'
}

kernel="$(uname -s 2>/dev/null)"
[ "$kernel" = Linux ] || problem "os: $kernel is not Linux"
os_id=unknown os_like="" os_version=""
if [ -r /etc/os-release ]; then
  os_id="$(. /etc/os-release && echo "${ID:-unknown}")"
  os_like="$(. /etc/os-release && echo "${ID_LIKE:-}")"
  os_version="$(. /etc/os-release && echo "${VERSION_ID:-}")"
fi
if [ -n "$OS_FAMILIES" ]; then
  found=""
  for family in $OS_FAMILIES; do
    for have in $os_id $os_like; do [ "$have" = "$family" ] && found=1; done
  done
  [ -n "$found" ] || problem "os: $os_id${os_like:+ (like $os_like)} is not one of $OS_FAMILIES"
fi
if [ -n "$MIN_OS_VERSION" ]; then
  if [ -z "$os_version" ]; then
    problem "os: no VERSION_ID in /etc/os-release, need at least $MIN_OS_VERSION"
  elif ! version_at_least "$os_version" "$MIN_OS_VERSION"; then
    problem "os: $os_id $os_version is older than $MIN_OS_VERSION"
  fi
fi

disk_mib="$(df -Pk "$DISK_PATH" 2>/dev/null | awk 'NR == 2 { print int($4 / 1024) }')"
if [ -z "$disk_mib" ]; then
  problem "disk: cannot read the free space of $DISK_PATH"
elif [ "$disk_mib" -lt "$MIN_DISK_MIB" ]; then
  problem "disk: $disk_mib MiB free on $DISK_PATH, need $MIN_DISK_MIB"
fi

memory_mib="$(awk '/^MemAvailable:/ { a = $2 } /^MemFree:/ { f = $2 }
  END { if (a == "") a = f; if (a != "") print int(a / 1024) }' /proc/meminfo 2>/dev/null)"
if [ -z "$memory_mib" ]; then
  problem "memory: cannot read /proc/meminfo"
elif [ "$memory_mib" -lt "$MIN_MEMORY_MIB" ]; then
  problem "memory: $memory_mib MiB available, need $MIN_MEMORY_MIB"
fi

missing=""
for cmd in $REQUIRED_COMMANDS; do
  command -v "$cmd" >/dev/null 2>&1 || missing="$missing $cmd"
done
[ -z "$missing" ] || problem "missing commands:$missing"

skew=""
if [ -n "${WORKFLOW_RUNNER_TIME:-}" ]; then
  skew=$(( $(date +%s) - WORKFLOW_RUNNER_TIME ))
  [ "$skew" -lt 0 ] && abs=$(( -skew )) || abs=$skew
  [ "$abs" -le "$MAX_CLOCK_SKEW_SECONDS" ] \
    || problem "clock: ${skew} s off the runner's clock, at most $MAX_CLOCK_SKEW_SECONDS allowed"
fi

echo "os $os_id ${os_version:-?} ($kernel $(uname -r 2>/dev/null)), $(uname -m 2>/dev/null)"
echo "disk ${disk_mib:-?} MiB free on $DISK_PATH, memory ${memory_mib:-?} MiB available, clock skew ${skew:-?} s"
if [ -n "$problems" ]; then
  echo "$problems"
  exit 1
fi
echo "node ok"
