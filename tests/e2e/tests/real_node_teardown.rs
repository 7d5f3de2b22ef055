//! `tests/cluster/cluster.sh down` leaves nothing of the real node on the host: no process,
//! mount, cgroup, bridge, network namespace, iptables rule, `/var/log/containers` symlink or
//! changed sysctl, with pods still running when it is called.
//!
//! Runs a private cluster in a state directory of its own, so it never disturbs the shared one.
//! Like the other real node tests it needs `WORKFLOW_REAL_NODE=1` and fails without it.

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::json;
use workflow_e2e::{
    CLUSTER_DIR_ENV, Cluster, REAL_NODE, REAL_NODE_IMAGES, real_node_placement, repo_root,
};

const TIMEOUT: Duration = Duration::from_secs(120);
/// What the kubelet and the CNI bridge plugin set, which `down` puts back.
const SYSCTLS: [&str; 7] = [
    "net/ipv4/ip_forward",
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
];

/// A cluster of this test's own; stopped when dropped if the test did not get that far.
struct PrivateCluster {
    dir: PathBuf,
    cluster: Cluster,
    up: bool,
}

impl PrivateCluster {
    fn start() -> PrivateCluster {
        // Short: containerd's socket lives in it, and a socket path holds at most 107 bytes.
        let dir = std::env::temp_dir().join(format!("wf-teardown-{}", std::process::id()));
        let private = PrivateCluster {
            cluster: Cluster::from_kubeconfig(dir.join("kubeconfig")),
            dir,
            up: true,
        };
        let status = private
            .script("up")
            .status()
            .expect("run tests/cluster/cluster.sh up");
        assert!(
            status.success(),
            "`cluster.sh up` of {} failed ({status})",
            private.dir.display()
        );
        private
    }

    fn script(&self, command: &str) -> Command {
        let mut cmd = Command::new("bash");
        cmd.arg(repo_root().join("tests/cluster/cluster.sh"))
            .arg(command)
            .env(CLUSTER_DIR_ENV, &self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::inherit())
            .stderr(Stdio::inherit());
        cmd
    }

    fn down(&mut self) {
        self.up = false;
        let status = self
            .script("down")
            .status()
            .expect("run tests/cluster/cluster.sh down");
        assert!(
            status.success(),
            "`cluster.sh down` of {} failed ({status})",
            self.dir.display()
        );
    }
}

impl Drop for PrivateCluster {
    fn drop(&mut self) {
        if self.up {
            let _ = self.script("down").status();
        }
    }
}

/// `KEY=value` lines of the node's `node.env`.
fn node_env(dir: &Path, key: &str) -> String {
    let path = dir.join("node/node.env");
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .find_map(|line| line.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key} in {}:\n{text}", path.display()))
        .to_owned()
}

fn cgroup_mounts() -> Vec<PathBuf> {
    fs::read_to_string("/proc/self/mounts")
        .expect("read /proc/self/mounts")
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            matches!(fields.get(2), Some(&"cgroup" | &"cgroup2")).then(|| PathBuf::from(fields[1]))
        })
        .collect()
}

/// Pids in every cgroup under `root` (relative to each hierarchy's mount point).
fn cgroup_pids(root: &str) -> BTreeSet<u32> {
    fn walk(dir: &Path, pids: &mut BTreeSet<u32>) {
        if let Ok(procs) = fs::read_to_string(dir.join("cgroup.procs")) {
            pids.extend(procs.lines().filter_map(|p| p.trim().parse::<u32>().ok()));
        }
        for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                walk(&entry.path(), pids);
            }
        }
    }
    let mut pids = BTreeSet::new();
    for mount in cgroup_mounts() {
        walk(&mount.join(root), &mut pids);
    }
    pids
}

/// A process that still runs (exited ones that wait to be reaped do not).
fn alive(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start());
        !matches!(state.and_then(|s| s.chars().next()), Some('Z' | 'X'))
    })
}

fn processes() -> impl Iterator<Item = u32> {
    fs::read_dir("/proc")
        .expect("read /proc")
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
}

fn cmdline(pid: u32) -> String {
    fs::read(format!("/proc/{pid}/cmdline"))
        .map(|raw| String::from_utf8_lossy(&raw).replace('\0', " "))
        .unwrap_or_default()
}

fn mounts_under(dir: &Path) -> Vec<String> {
    let prefix = dir.to_string_lossy().into_owned();
    fs::read_to_string("/proc/self/mountinfo")
        .expect("read /proc/self/mountinfo")
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|mount| mount.replace("\\040", " "))
        .filter(|mount| *mount == prefix || mount.starts_with(&format!("{prefix}/")))
        .collect()
}

/// The entries of /run/netns holding the network namespace of one of `pids`.
fn netns_of(pids: &BTreeSet<u32>) -> BTreeSet<PathBuf> {
    let inodes: BTreeSet<u64> = pids
        .iter()
        .filter_map(|pid| fs::metadata(format!("/proc/{pid}/ns/net")).ok())
        .map(|m| m.ino())
        .collect();
    fs::read_dir("/run/netns")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|path| fs::metadata(path).is_ok_and(|m| inodes.contains(&m.ino())))
        .collect()
}

fn log_symlinks_into(dir: &Path) -> Vec<PathBuf> {
    fs::read_dir("/var/log/containers")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|link| fs::read_link(link).is_ok_and(|target| target.starts_with(dir)))
        .collect()
}

/// The host's iptables rules and chains (IPv4 and IPv6), without counters.
fn iptables_rules() -> Vec<String> {
    ["iptables-save", "ip6tables-save"]
        .iter()
        .flat_map(|program| {
            let out = Command::new(program)
                .output()
                .unwrap_or_else(|e| panic!("run {program}: {e}"));
            assert!(out.status.success(), "{program} failed: {out:?}");
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter(|line| !line.starts_with('#'))
                .map(|line| match line.split_once(" [") {
                    Some((chain, _counters)) if line.starts_with(':') => chain.to_owned(),
                    _ => line.to_owned(),
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

fn sysctls() -> Vec<(String, String)> {
    SYSCTLS
        .iter()
        .map(|key| {
            let value = fs::read_to_string(Path::new("/proc/sys").join(key)).unwrap_or_default();
            ((*key).to_owned(), value.trim().to_owned())
        })
        .collect()
}

fn another_kubelet_runs() -> bool {
    processes().any(|pid| {
        fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "kubelet")
            && alive(pid)
    })
}

fn pod(name: &str, image: &str, command: &[&str]) -> String {
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name },
        "spec": {
            "restartPolicy": "Never",
            "containers": [{
                "name": "main",
                "image": image,
                "command": command,
                "volumeMounts": [{ "name": "scratch", "mountPath": "/scratch" }],
            }],
            "volumes": [{ "name": "scratch", "emptyDir": { "medium": "Memory" } }],
        },
    });
    for (key, value) in real_node_placement().as_object().into_iter().flatten() {
        pod["spec"][key] = value.clone();
    }
    pod.to_string()
}

#[test]
fn cluster_down_leaves_nothing_of_the_real_node_on_the_host() {
    let rules_before = iptables_rules();
    let sysctls_before = sysctls();

    let mut private = PrivateCluster::start();
    let cluster = &private.cluster;
    cluster.require_real_node();
    let dir = private.dir.clone();
    let cgroup_root = node_env(&dir, "CGROUP_ROOT");
    let bridge = node_env(&dir, "BRIDGE");

    // Pods in each state down meets: running (one ignoring SIGTERM), finished, and one whose
    // sandbox runs while the image it asks for cannot be pulled; each with a tmpfs volume.
    let ns = cluster.fresh_namespace("teardown");
    let busybox = REAL_NODE_IMAGES[0];
    let stubborn: &[&str] = &["sh", "-c", "trap '' TERM; sleep 3600 & wait"];
    let pods: [(&str, &str, &[&str], &[&str]); 4] = [
        ("stubborn", busybox, stubborn, &["Running"]),
        ("sleeper", busybox, &["sleep", "3600"], &["Running"]),
        ("done", busybox, &["true"], &["Succeeded"]),
        (
            "unpullable",
            "localhost/absent:1.0",
            &["true"],
            &["ErrImagePull", "ImagePullBackOff"],
        ),
    ];
    for (name, image, command, _) in pods {
        let manifest = pod(name, image, command);
        let out =
            cluster.kubectl_with_stdin(&["-n", &ns, "create", "-f", "-"], manifest.as_bytes());
        assert!(
            out.status.success(),
            "create: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for (name, _, _, states) in pods {
        cluster.wait_for(&format!("pod {name} in {states:?}"), TIMEOUT, || {
            let pod = cluster.kubectl_json(&["-n", &ns, "get", "pod", name]);
            assert_eq!(pod["spec"]["nodeName"], REAL_NODE, "pod: {pod:#}");
            let waiting = &pod["status"]["containerStatuses"][0]["state"]["waiting"]["reason"];
            [&pod["status"]["phase"], waiting]
                .iter()
                .any(|state| states.iter().any(|s| state.as_str() == Some(*s)))
        });
    }

    // What there is to remove, so that the checks below are not vacuous.
    let pod_pids = cgroup_pids(&cgroup_root);
    let daemon_pids: BTreeSet<u32> = ["kubelet", "containerd"]
        .iter()
        .map(|c| {
            let file = dir.join(format!("pids/{c}.pid"));
            let text =
                fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            text.trim()
                .parse()
                .unwrap_or_else(|e| panic!("{}: {e}", file.display()))
        })
        .collect();
    let netns = netns_of(&pod_pids);
    assert!(
        pod_pids.len() >= 4,
        "pods' processes in cgroup {cgroup_root}: {pod_pids:?}"
    );
    assert!(
        netns.len() >= 3,
        "network namespaces of the running pods: {netns:?}"
    );
    assert!(
        !mounts_under(&dir).is_empty(),
        "no mount under {}",
        dir.display()
    );
    assert!(
        Path::new("/sys/class/net").join(&bridge).exists(),
        "no bridge {bridge}"
    );
    assert!(
        !log_symlinks_into(&dir).is_empty(),
        "no /var/log/containers symlink"
    );

    private.down();

    let left: Vec<u32> = pod_pids
        .iter()
        .chain(&daemon_pids)
        .copied()
        .filter(|p| alive(*p))
        .collect();
    assert!(left.is_empty(), "processes still running: {left:?}");
    let prefix = dir.to_string_lossy().into_owned();
    let mentioning: Vec<String> = processes()
        .filter(|pid| alive(*pid))
        .map(cmdline)
        .filter(|line| line.contains(&prefix))
        .collect();
    assert!(
        mentioning.is_empty(),
        "processes of {prefix} still running: {mentioning:#?}"
    );
    assert_eq!(mounts_under(&dir), Vec::<String>::new(), "mounts left");
    let cgroups: Vec<PathBuf> = cgroup_mounts()
        .into_iter()
        .map(|m| m.join(&cgroup_root))
        .filter(|c| c.exists())
        .collect();
    assert!(cgroups.is_empty(), "cgroups left: {cgroups:?}");
    assert!(
        !Path::new("/sys/class/net").join(&bridge).exists(),
        "bridge {bridge} left"
    );
    let netns_left: Vec<&PathBuf> = netns.iter().filter(|p| p.exists()).collect();
    assert!(
        netns_left.is_empty(),
        "network namespaces left: {netns_left:?}"
    );
    assert_eq!(
        log_symlinks_into(&dir),
        Vec::<PathBuf>::new(),
        "/var/log/containers symlinks left"
    );
    assert_eq!(iptables_rules(), rules_before, "iptables rules changed");
    // Another cluster's kubelet keeps them as it set them.
    if !another_kubelet_runs() {
        assert_eq!(sysctls(), sysctls_before, "sysctls not put back");
    }
    assert!(!dir.exists(), "{} left", dir.display());
}
