//! The runner against real target hosts: an OpenSSH server (Debian's `openssh-server`) on
//! loopback addresses of its own (127.0.0.2, 127.0.0.3, ...), with its own host key and the
//! test's client key, and hostile servers on others (a handshake that stalls, a flood of banner
//! lines, a peer that does not speak SSH). Nothing leaves the loopback interface. Targets
//! behind a jump host run in a network namespace of their own (see
//! [`Hosts::start_behind_jump`]; as another user than root, in a user namespace of its own).

use std::io::{BufRead as _, Write as _};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const RUNNER: &str = env!("CARGO_BIN_EXE_workflow-runner");

/// An sshd listening on some loopback addresses, and the files a step pod would have mounted.
struct Hosts {
    dir: tempfile::TempDir,
    port: u16,
    sshd: Child,
}

impl Hosts {
    /// An sshd on `127.0.0.<n>` for each `n` of `hosts`, all on one free port.
    fn start(hosts: &[u8]) -> Self {
        Self::start_with(hosts, |_| String::new())
    }

    /// [`Hosts::start`] with more sshd configuration: what `extra` returns, given the folder
    /// that holds the keys (`host_key`, `client_key`) before sshd starts.
    fn start_with(hosts: &[u8], extra: impl FnOnce(&Path) -> String) -> Self {
        let (dir, port, config) = Self::prepare(hosts, extra);
        let child = Command::new(sshd_path())
            .args(["-D", "-e", "-f"])
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start sshd");
        let hosts_up = Self {
            dir,
            port,
            sshd: child,
        };
        for n in hosts {
            wait_listening(SocketAddr::from((Ipv4Addr::new(127, 0, 0, *n), port)));
        }
        hosts_up
    }

    /// The keys, `known_hosts` (each host under `[127.0.0.<n>]:port`) and `sshd_config` of an
    /// sshd on `hosts`, in a new folder.
    fn prepare(
        hosts: &[u8],
        extra: impl FnOnce(&Path) -> String,
    ) -> (tempfile::TempDir, u16, PathBuf) {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let port = free_port(hosts);
        keygen(&dir.path().join("host_key"));
        keygen(&dir.path().join("client_key"));
        std::fs::copy(
            dir.path().join("client_key.pub"),
            dir.path().join("authorized_keys"),
        )
        .expect("authorized_keys");
        let host_key = std::fs::read_to_string(dir.path().join("host_key.pub")).expect("host key");
        let known: String = hosts
            .iter()
            .map(|n| format!("[127.0.0.{n}]:{port} {host_key}"))
            .collect();
        std::fs::write(dir.path().join("known_hosts"), known).expect("known_hosts");
        let listen: String = hosts
            .iter()
            .map(|n| format!("ListenAddress 127.0.0.{n}\n"))
            .collect();
        let config = format!(
            "Port {port}\n{listen}{}{}",
            sshd_config(dir.path(), "host_key"),
            extra(dir.path())
        );
        let path = dir.path().join("sshd_config");
        std::fs::write(&path, config).expect("sshd_config");
        // sshd's privilege separation directory, as its service would create it.
        let _ = std::fs::create_dir_all("/run/sshd");
        (dir, port, path)
    }

    /// Targets only a jump host reaches. The sshd of `hosts` runs in a network namespace of
    /// its own (`unshare --net`): its `127.0.0.<n>` are on a loopback interface of that
    /// namespace, which nothing outside it can reach, so the runner connecting to them is
    /// refused. The jump host listens on 127.0.0.2 outside; each connection to it becomes an
    /// `sshd -i` (its own host key, `jump_key`) started inside the targets' namespace
    /// (`nsenter --net`) with the connection as its input and output. So the only way to the
    /// targets is a channel the jump host opens. Root makes the namespace directly; another
    /// user makes it inside a user namespace that maps that user to itself (keeping the
    /// capabilities to bring its loopback up), so no privilege is needed.
    fn start_behind_jump(hosts: &[u8]) -> (Self, JumpServer) {
        let (dir, port, config) = Self::prepare(hosts, |_| String::new());
        let root = uid() == "0";
        let own = if root {
            &["--net"][..]
        } else {
            &["--user", "--map-current-user", "--keep-caps", "--net"][..]
        };
        let child = Command::new("unshare")
            .args(own)
            .args([
                "sh",
                "-c",
                "ip link set lo up && exec \"$0\" -D -e -f \"$1\"",
            ])
            .arg(sshd_path())
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start sshd in a network namespace (unshare, util-linux)");
        let pid = child.id();
        let mut namespace = vec![format!("--net=/proc/{pid}/ns/net")];
        if !root {
            namespace.push(format!("--user=/proc/{pid}/ns/user"));
            namespace.push("--preserve-credentials".into());
        }
        let hosts_up = Self {
            dir,
            port,
            sshd: child,
        };
        for n in hosts {
            wait_listening_in(&namespace, &format!("127.0.0.{n}:{port}"));
        }
        let jump = JumpServer::start(&hosts_up, namespace);
        (hosts_up, jump)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Runs the runner on `targets` (`(name, last octet)`) with `args` and `command`.
    fn run(&self, targets: &[(&str, u8)], args: &[&str], command: &str) -> Run {
        let child = self.spawn(targets, args, command);
        Run::wait(child, self.path("report"))
    }

    fn spawn(&self, targets: &[(&str, u8)], args: &[&str], command: &str) -> Child {
        let list: Vec<serde_json::Value> = targets
            .iter()
            .map(|(name, n)| serde_json::json!({"name": name, "ip": format!("127.0.0.{n}"), "role": "Worker"}))
            .collect();
        std::fs::write(
            self.path("targets.json"),
            serde_json::to_string(&list).expect("json"),
        )
        .expect("targets.json");
        let _ = std::fs::remove_file(self.path("report"));
        let mut runner = Command::new(RUNNER);
        if !args.contains(&"--key") {
            runner.arg("--key").arg(self.path("client_key"));
        }
        runner
            .arg("--targets-file")
            .arg(self.path("targets.json"))
            .arg("--known-hosts")
            .arg(self.path("known_hosts"))
            .arg("--termination-log")
            .arg(self.path("report"))
            .args(["--port", &self.port.to_string(), "--user", &user()])
            .args(args)
            .args(["--", command])
            .env_remove("WORKFLOW_SSH_COMMAND")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the runner")
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        let _ = self.sshd.kill();
        let _ = self.sshd.wait();
    }
}

/// The jump host of [`Hosts::start_behind_jump`]: where it listens, and how many connections
/// it took.
struct JumpServer {
    port: u16,
    connections: Arc<AtomicUsize>,
}

impl JumpServer {
    /// `namespace`: the `nsenter` arguments that enter the targets' namespace.
    fn start(hosts: &Hosts, namespace: Vec<String>) -> Self {
        keygen(&hosts.path("jump_key"));
        let config = hosts.path("jump_config");
        std::fs::write(&config, sshd_config(hosts.dir.path(), "jump_key")).expect("jump_config");
        let listener = TcpListener::bind("127.0.0.2:0").expect("bind the jump host");
        let port = listener.local_addr().expect("its port").port();
        let jump_key = std::fs::read_to_string(hosts.path("jump_key.pub")).expect("jump key");
        let mut known = std::fs::OpenOptions::new()
            .append(true)
            .open(hosts.path("known_hosts"))
            .expect("known_hosts");
        write!(known, "[127.0.0.2]:{port} {jump_key}").expect("known_hosts");
        let connections = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&connections);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                counted.fetch_add(1, Ordering::SeqCst);
                let output = stream.try_clone().expect("the connection, twice");
                let sshd = Command::new("nsenter")
                    .args(&namespace)
                    .args([sshd_path(), "-i", "-e", "-f"])
                    .arg(&config)
                    .stdin(Stdio::from(std::os::fd::OwnedFd::from(stream)))
                    .stdout(Stdio::from(std::os::fd::OwnedFd::from(output)))
                    .stderr(Stdio::inherit())
                    .spawn();
                if let Ok(mut sshd) = sshd {
                    std::thread::spawn(move || sshd.wait());
                }
            }
        });
        Self { port, connections }
    }

    /// The runner's arguments to go through this jump host.
    fn args(&self) -> Vec<String> {
        vec![
            "--jump-host".into(),
            "127.0.0.2".into(),
            "--jump-port".into(),
            self.port.to_string(),
        ]
    }
}

/// What a run of the runner left: its exit code, log, termination message, time and peak memory.
struct Run {
    code: Option<i32>,
    log: String,
    report: String,
    took: Duration,
    peak_rss_kib: u64,
}

impl Run {
    fn wait(child: Child, report: PathBuf) -> Self {
        let start = Instant::now();
        let pid = child.id();
        // Peak memory, read while the runner runs (its /proc entry goes when it is reaped).
        let sampler = std::thread::spawn(move || {
            let mut peak = 0;
            while let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
                if let Some(kib) = status
                    .lines()
                    .find_map(|l| l.strip_prefix("VmHWM:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                {
                    peak = kib;
                }
                if status.contains("State:\tZ") {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            peak
        });
        let output: Output = child.wait_with_output().expect("the runner ran");
        let took = start.elapsed();
        Run {
            code: output.status.code(),
            log: String::from_utf8_lossy(&output.stdout).into_owned()
                + &String::from_utf8_lossy(&output.stderr),
            report: std::fs::read_to_string(report).unwrap_or_default(),
            took,
            peak_rss_kib: sampler.join().unwrap_or(0),
        }
    }

    fn line_of(&self, target: &str) -> &str {
        self.report
            .lines()
            .find(|l| l.split_whitespace().nth(1).map(|t| t.trim_end_matches(':')) == Some(target))
            .unwrap_or_else(|| panic!("no line for {target} in the report:\n{}", self.report))
    }
}

fn sshd_path() -> &'static str {
    ["/usr/sbin/sshd", "/usr/bin/sshd"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .unwrap_or_else(|| {
            panic!("no sshd: install openssh-server (apt-get install openssh-server)")
        })
}

/// What every test sshd is: logins with the keys of `dir`'s `authorized_keys` only, its host
/// key `dir/host_key`, no PID file, quiet.
fn sshd_config(dir: &Path, host_key: &str) -> String {
    format!(
        "HostKey {dir}/{host_key}\nAuthorizedKeysFile {dir}/authorized_keys\n\
         PidFile none\nUsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
         PermitRootLogin prohibit-password\nStrictModes no\nLogLevel ERROR\nMaxStartups 100\n",
        dir = dir.display()
    )
}

fn keygen(path: &Path) {
    let status = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .status()
        .expect("ssh-keygen (openssh-client)");
    assert!(status.success(), "ssh-keygen failed");
}

fn uid() -> String {
    let out = Command::new("id").arg("-u").output().expect("id -u");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn user() -> String {
    let out = Command::new("id").arg("-un").output().expect("id -un");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A port free on every `127.0.0.<n>` of `hosts` (and on the hostile servers' addresses).
fn free_port(hosts: &[u8]) -> u16 {
    for _ in 0..50 {
        let port = TcpListener::bind("127.0.0.2:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let all_free = hosts
            .iter()
            .chain(&[5, 6, 7, 8])
            .all(|n| TcpListener::bind((Ipv4Addr::new(127, 0, 0, *n), port)).is_ok());
        if all_free {
            return port;
        }
    }
    panic!("no port free on all the test's loopback addresses");
}

fn wait_listening(address: SocketAddr) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_err() {
        assert!(
            Instant::now() < deadline,
            "sshd does not listen on {address}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until `address` is listened on inside the network namespace `namespace` enters
/// (`nsenter` arguments).
fn wait_listening_in(namespace: &[String], address: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let listening = Command::new("nsenter")
            .args(namespace)
            .args(["ss", "-Hltn"])
            .output()
            .expect("nsenter and ss (util-linux, iproute2)");
        if String::from_utf8_lossy(&listening.stdout).contains(address) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "sshd does not listen on {address} in its namespace"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A server on `127.0.0.<n>:port` that treats each connection with `serve`, in a thread.
fn hostile(n: u8, port: u16, serve: fn(TcpStream)) {
    let listener = TcpListener::bind((Ipv4Addr::new(127, 0, 0, n), port)).expect("bind");
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || serve(stream));
        }
    });
}

#[test]
fn a_command_runs_on_every_target_with_its_facts_and_each_is_reported_ok() {
    let hosts = Hosts::start(&[2, 3]);
    let run = hosts.run(
        &[("node-1", 2), ("node-2", 3)],
        &[],
        "echo \"hello from $WORKFLOW_TARGET_NAME at $WORKFLOW_TARGET_IP\"",
    );
    assert_eq!(run.code, Some(0), "{}", run.log);
    assert!(
        run.report
            .starts_with("targets 2: 2 ok, 0 failed, 0 unreachable\n"),
        "{}",
        run.report
    );
    assert!(run.line_of("node-1").starts_with("OK node-1 ("));
    assert!(run.line_of("node-2").starts_with("OK node-2 ("));
    assert!(
        run.log.contains("[node-1] hello from node-1 at 127.0.0.2"),
        "{}",
        run.log
    );
    assert!(
        run.log.contains("[node-2] hello from node-2 at 127.0.0.3"),
        "{}",
        run.log
    );
}

#[test]
fn a_failing_target_is_reported_with_its_exit_code_and_last_line_and_the_others_still_run() {
    let hosts = Hosts::start(&[2, 3]);
    let run = hosts.run(
        &[("node-1", 2), ("node-2", 3)],
        &[],
        "if [ \"$WORKFLOW_TARGET_NAME\" = node-2 ]; then echo checking; echo 'disk 97% full' >&2; exit 3; fi; echo fine",
    );
    assert_eq!(run.code, Some(1), "{}", run.log);
    assert!(
        run.report
            .starts_with("targets 2: 1 ok, 1 failed, 0 unreachable\n"),
        "{}",
        run.report
    );
    let line = run.line_of("node-2");
    assert!(
        line.starts_with("FAIL node-2: exit code 3 after "),
        "{line}"
    );
    assert!(line.ends_with(": disk 97% full"), "{line}");
    assert!(run.line_of("node-1").starts_with("OK node-1"));
}

#[test]
fn a_host_that_is_down_is_unreachable_and_named() {
    let hosts = Hosts::start(&[2]);
    let run = hosts.run(&[("node-1", 2), ("node-down", 4)], &[], "true");
    assert_eq!(run.code, Some(1), "{}", run.log);
    let line = run.line_of("node-down");
    assert!(
        line.starts_with(&format!(
            "UNREACHABLE node-down: connect 127.0.0.4:{}: ",
            hosts.port
        )),
        "{line}"
    );
    assert!(line.contains("refused"), "{line}");
    assert!(run.line_of("node-1").starts_with("OK node-1"));
}

#[test]
fn a_wrong_key_fails_naming_authentication_on_that_host() {
    let hosts = Hosts::start(&[2]);
    keygen(&hosts.path("other_key"));
    let key = hosts.path("other_key");
    let run = hosts.run(
        &[("node-1", 2)],
        &["--key", key.to_str().expect("utf-8")],
        "true",
    );
    assert_eq!(run.code, Some(1), "{}", run.log);
    let line = run.line_of("node-1");
    assert!(
        line.starts_with(&format!(
            "UNREACHABLE node-1: authentication refused: 127.0.0.2:{} did not accept the key for user",
            hosts.port
        )),
        "{line}"
    );
}

#[test]
fn a_host_key_not_in_known_hosts_is_refused_before_logging_in() {
    let hosts = Hosts::start(&[2]);
    // known_hosts lists another key for the target: a machine in the middle, or a reinstall.
    keygen(&hosts.path("impostor"));
    let impostor = std::fs::read_to_string(hosts.path("impostor.pub")).expect("key");
    std::fs::write(
        hosts.path("known_hosts"),
        format!("[127.0.0.2]:{} {impostor}", hosts.port),
    )
    .expect("known_hosts");
    let run = hosts.run(&[("node-1", 2)], &[], "touch /tmp/should-not-run");
    assert_eq!(run.code, Some(1), "{}", run.log);
    let line = run.line_of("node-1");
    assert!(
        line.starts_with(
            "UNREACHABLE node-1: host key mismatch: 127.0.0.2 offered ssh-ed25519 SHA256:"
        ),
        "{line}"
    );

    // Not listed at all: refused too, unless the policy says to accept any key.
    std::fs::write(hosts.path("known_hosts"), "").expect("known_hosts");
    let run = hosts.run(&[("node-1", 2)], &[], "true");
    assert!(
        run.line_of("node-1")
            .starts_with("UNREACHABLE node-1: host key not trusted: ssh-ed25519 SHA256:"),
        "{}",
        run.report
    );
    let run = hosts.run(
        &[("node-1", 2)],
        &["--host-key-policy", "accept-any"],
        "true",
    );
    assert_eq!(run.code, Some(0), "{}", run.log);
}

#[test]
fn a_command_past_its_timeout_is_ended_and_named() {
    let hosts = Hosts::start(&[2]);
    let run = hosts.run(
        &[("node-1", 2)],
        &["--command-timeout", "1"],
        "echo started; sleep 60",
    );
    assert_eq!(run.code, Some(1), "{}", run.log);
    assert_eq!(
        run.line_of("node-1"),
        "FAIL node-1: timed out after 1 s: started"
    );
    assert!(run.took < Duration::from_secs(10), "took {:?}", run.took);
}

#[test]
fn endless_output_costs_bounded_time_and_memory() {
    let hosts = Hosts::start(&[2]);
    let run = hosts.run(
        &[("node-1", 2)],
        &["--command-timeout", "3", "--log-limit", "1000"],
        "yes 'y'",
    );
    assert_eq!(run.code, Some(1), "{}", &run.log[..run.log.len().min(2000)]);
    assert_eq!(run.line_of("node-1"), "FAIL node-1: timed out after 3 s: y");
    assert!(
        run.log
            .contains("more bytes of output not copied to this log")
    );
    assert!(run.log.len() < 20_000, "{} bytes of log", run.log.len());
    assert!(run.took < Duration::from_secs(15), "took {:?}", run.took);
    assert!(
        run.peak_rss_kib > 0 && run.peak_rss_kib < 64 * 1024,
        "peak RSS {} KiB",
        run.peak_rss_kib
    );
}

#[test]
fn hostile_servers_cost_at_most_the_connect_timeout_each_and_are_named() {
    let hosts = Hosts::start(&[2]);
    // 127.0.0.5: accepts, then says nothing (a stalled handshake).
    hostile(5, hosts.port, |stream| {
        std::thread::sleep(Duration::from_secs(60));
        drop(stream);
    });
    // 127.0.0.6: an endless flood of banner lines, never a version line.
    hostile(6, hosts.port, |mut stream| {
        let line = [b'x'; 200];
        while stream
            .write_all(&line)
            .and_then(|()| stream.write_all(b"\r\n"))
            .is_ok()
        {}
    });
    // 127.0.0.7: not SSH at all.
    hostile(7, hosts.port, |mut stream| {
        let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n");
        let _ = std::io::BufReader::new(&stream).lines().next();
    });
    let run = hosts.run(
        &[("good", 2), ("stalled", 5), ("flood", 6), ("not-ssh", 7)],
        &["--connect-timeout", "5"],
        "echo ok",
    );
    assert_eq!(run.code, Some(1), "{}", run.log);
    assert!(
        run.report
            .starts_with("targets 4: 1 ok, 0 failed, 3 unreachable\n"),
        "{}",
        run.report
    );
    assert!(run.line_of("good").starts_with("OK good"));
    assert_eq!(
        run.line_of("stalled"),
        format!(
            "UNREACHABLE stalled: no SSH session with 127.0.0.5:{} within 5 s (connect, handshake and login)",
            hosts.port
        )
    );
    assert!(
        run.line_of("flood").starts_with("UNREACHABLE flood: "),
        "{}",
        run.report
    );
    assert!(
        run.line_of("not-ssh").starts_with("UNREACHABLE not-ssh: "),
        "{}",
        run.report
    );
    // In parallel: the three bad hosts together cost one connect timeout (5 s), not three
    // (15 s); the margin between is for a loaded machine.
    assert!(run.took < Duration::from_secs(12), "took {:?}", run.took);
    assert!(
        run.peak_rss_kib < 64 * 1024,
        "peak RSS {} KiB",
        run.peak_rss_kib
    );
}

#[test]
fn without_a_key_the_runner_refuses_to_start_and_says_how_to_mount_one() {
    let hosts = Hosts::start(&[2]);
    let missing = hosts.path("no-such-key");
    let run = hosts.run(
        &[("node-1", 2)],
        &["--key", missing.to_str().expect("utf-8")],
        "true",
    );
    assert_eq!(run.code, Some(2), "{}", run.log);
    assert!(
        run.report.starts_with(&format!(
            "workflow-runner: no usable SSH key at {}",
            missing.display()
        )),
        "{}",
        run.report
    );
    assert!(
        run.report.contains("kubernetes.io/ssh-auth Secret") && run.report.contains("workflow-ssh"),
        "{}",
        run.report
    );
}

#[test]
fn many_targets_run_at_most_parallel_at_a_time() {
    // Twelve targets on one host, each holding a slot for 2 s and writing down, by the host's
    // clock, when it held it. How many held one at the same moment is read from those
    // intervals, not from the wall time (which a loaded machine stretches).
    let hosts = Hosts::start(&[2]);
    let held = hosts.path("held");
    std::fs::create_dir(&held).expect("held");
    let targets: Vec<(String, u8)> = (0..12).map(|i| (format!("node-{i}"), 2)).collect();
    let targets: Vec<(&str, u8)> = targets.iter().map(|(n, h)| (n.as_str(), *h)).collect();
    let command = format!(
        "f={}/$WORKFLOW_TARGET_NAME; date +%s%N > $f; sleep 2; date +%s%N >> $f",
        held.display()
    );
    let run = hosts.run(&targets, &["--parallel", "4"], &command);
    assert_eq!(run.code, Some(0), "{}", run.log);
    assert!(
        run.report.starts_with("targets 12: 12 ok"),
        "{}",
        run.report
    );
    let mut edges = Vec::new();
    for entry in std::fs::read_dir(&held).expect("read held") {
        let text = std::fs::read_to_string(entry.expect("entry").path()).expect("interval");
        let times: Vec<u128> = text.lines().map(|l| l.parse().expect("ns")).collect();
        assert_eq!(times.len(), 2, "{text}");
        edges.push((times[0], 1i32));
        edges.push((times[1], -1i32));
    }
    assert_eq!(edges.len(), 24, "every target held a slot once");
    // Ends sort before starts at the same instant: a slot handed over is not two at once.
    edges.sort();
    let (mut now, mut most) = (0, 0);
    for (_, step) in edges {
        now += step;
        most = most.max(now);
    }
    assert!(most <= 4, "{most} targets ran at once with --parallel 4");
    assert!(most >= 2, "targets ran one at a time with --parallel 4");
}

#[test]
fn a_stdin_file_is_the_commands_input_on_every_target_and_the_runners_clock_is_in_its_env() {
    let hosts = Hosts::start(&[2, 3]);
    let script = hosts.path("configure.sh");
    std::fs::write(&script, "echo configured $WORKFLOW_TARGET_NAME\n").expect("script");
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    let run = hosts.run(
        &[("node-1", 2), ("node-2", 3)],
        &["--stdin-file", script.to_str().expect("utf-8")],
        "sh -s; echo clock $WORKFLOW_RUNNER_TIME",
    );
    assert_eq!(run.code, Some(0), "{}", run.log);
    for name in ["node-1", "node-2"] {
        assert!(
            run.log.contains(&format!("[{name}] configured {name}")),
            "{}",
            run.log
        );
    }
    let clock: u64 = run
        .log
        .lines()
        .find_map(|l| l.strip_prefix("[node-1] clock "))
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or_else(|| panic!("the runner's clock in the log: {}", run.log));
    assert!(
        (before..before + 60).contains(&clock),
        "{clock} is the runner's time"
    );

    // Without a stdin file the input is empty and closed: a command reading it does not wait.
    let run = hosts.run(
        &[("node-1", 2)],
        &["--command-timeout", "5"],
        "cat; echo read all",
    );
    assert_eq!(run.code, Some(0), "{}", run.report);
    assert!(run.log.contains("[node-1] read all"), "{}", run.log);

    let missing = hosts.run(
        &[("node-1", 2)],
        &["--stdin-file", "/nonexistent/script"],
        "true",
    );
    assert_eq!(missing.code, Some(2), "{}", missing.report);
    assert!(
        missing
            .report
            .contains("read the stdin file /nonexistent/script"),
        "{}",
        missing.report
    );
}

#[test]
fn copies_are_streamed_checked_and_renamed_into_place_and_not_sent_again() {
    let hosts = Hosts::start(&[2, 3]);
    // 6 MiB: far over what a stdin file may hold, streamed rather than read into memory.
    let source = hosts.path("kubelet-like");
    let mut content = Vec::with_capacity(6 << 20);
    let mut x: u32 = 2_463_534_242;
    while content.len() < 6 << 20 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        content.extend_from_slice(&x.to_le_bytes());
    }
    std::fs::write(&source, &content).expect("source");
    let dest = hosts.path("delivered/bin/kubelet-like");
    let spec = format!("{}:{}:0750", source.display(), dest.display());
    let run = hosts.run(&[("node-1", 2), ("node-2", 3)], &["--copy", &spec], "true");
    assert_eq!(run.code, Some(0), "{}\n{}", run.report, run.log);
    assert_eq!(std::fs::read(&dest).expect("delivered"), content);
    assert!(
        run.log.contains(&format!(
            "{} written ({} bytes)",
            dest.display(),
            content.len()
        )),
        "{}",
        run.log
    );
    let leftovers: Vec<_> = std::fs::read_dir(dest.parent().expect("a directory"))
        .expect("the directory")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().contains(".partial."))
        .collect();
    assert!(
        leftovers.is_empty(),
        "no temporary file is left: {leftovers:?}"
    );
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(
        std::fs::metadata(&dest)
            .expect("delivered")
            .permissions()
            .mode()
            & 0o777,
        0o750
    );

    // The same content again: not sent, the command still runs.
    let again = hosts.run(&[("node-1", 2)], &["--copy", &spec], "echo ran");
    assert_eq!(again.code, Some(0), "{}", again.report);
    assert!(
        again.log.contains(&format!("{} unchanged", dest.display()))
            && again.log.contains("[node-1] ran"),
        "{}",
        again.log
    );

    // A destination that cannot be written fails the target naming it; the command does not run.
    let blocked = hosts.path("a-file");
    std::fs::write(&blocked, "not a directory").expect("a file");
    let bad = format!("{}:{}/kubelet", source.display(), blocked.display());
    let failed = hosts.run(&[("node-1", 2)], &["--copy", &bad], "echo ran");
    assert_eq!(failed.code, Some(1), "{}", failed.report);
    assert!(
        failed.line_of("node-1").contains("copy to ")
            && failed.line_of("node-1").contains("could not write"),
        "{}",
        failed.report
    );
    assert!(!failed.log.contains("[node-1] ran"), "{}", failed.log);

    let missing = hosts.run(&[("node-1", 2)], &["--copy", "/nonexistent:/tmp/x"], "true");
    assert_eq!(missing.code, Some(2), "{}", missing.report);
    assert!(
        missing.report.contains("open /nonexistent"),
        "{}",
        missing.report
    );
}

#[test]
fn node_ready_outside_a_pod_refuses_to_start_and_says_what_it_needs() {
    let dir = tempfile::tempdir().expect("temp dir");
    let targets = dir.path().join("targets.json");
    std::fs::write(
        &targets,
        r#"[{"name": "node-1", "ip": "127.0.0.2", "role": "Worker"}]"#,
    )
    .expect("targets");
    let report = dir.path().join("report");
    let out = Command::new(RUNNER)
        .arg("--node-ready")
        .arg("--targets-file")
        .arg(&targets)
        .arg("--termination-log")
        .arg(&report)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .expect("run the runner");
    assert_eq!(out.status.code(), Some(2));
    let message = std::fs::read_to_string(&report).unwrap_or_default();
    assert!(
        message.contains("service account") && message.contains("may get nodes"),
        "{message}"
    );
}

#[test]
fn a_file_under_the_key_or_the_token_is_never_sent() {
    let hosts = Hosts::start(&[2]);
    let key = hosts.path("client_key");
    // Through a link from elsewhere too: the kernel's path is what counts.
    let elsewhere = tempfile::tempdir().expect("temp dir");
    let link = elsewhere.path().join("innocent.sh");
    std::os::unix::fs::symlink(&key, &link).expect("symlink");
    for args in [
        vec![
            "--copy".to_string(),
            format!("{}:/tmp/stolen", key.display()),
        ],
        vec![
            "--copy".to_string(),
            format!("{}:/tmp/stolen", link.display()),
        ],
        vec!["--stdin-file".to_string(), key.display().to_string()],
        vec!["--stdin-file".to_string(), link.display().to_string()],
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let run = hosts.run(&[("node-1", 2)], &args, "echo ran");
        assert_eq!(run.code, Some(2), "{args:?}: {}", run.report);
        assert!(
            run.report
                .contains("which holds the SSH key or the service account's token: it is never sent to a target"),
            "{args:?}: {}",
            run.report
        );
        assert!(!run.log.contains("[node-1] ran"), "{args:?}: {}", run.log);
    }
}

#[test]
fn a_targets_file_other_than_the_one_the_step_was_made_with_is_refused() {
    let hosts = Hosts::start(&[2]);
    // The file each run writes is the same list, byte for byte.
    let first = hosts.run(&[("node-1", 2)], &[], "true");
    assert_eq!(first.code, Some(0), "{}", first.report);
    let digest = {
        use sha2::Digest as _;
        let list = std::fs::read(hosts.path("targets.json")).expect("targets.json");
        hex::encode(sha2::Sha256::digest(list))
    };
    let run = hosts.run(&[("node-1", 2)], &["--targets-sha256", &digest], "echo ran");
    assert_eq!(run.code, Some(0), "{}", run.report);
    let other = "0".repeat(64);
    let run = hosts.run(&[("node-1", 2)], &["--targets-sha256", &other], "echo ran");
    assert_eq!(run.code, Some(2), "{}", run.report);
    assert!(
        run.report
            .contains("it is not the list the operator wrote for this step"),
        "{}",
        run.report
    );
    assert!(!run.log.contains("[node-1] ran"), "{}", run.log);
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// `ssh-keygen -s authority` over `key.pub` with `options` (e.g. `-h`, `-n principals`): the
/// certificate `key-cert.pub`.
fn sign(authority: &Path, key: &Path, options: &[&str]) -> PathBuf {
    let status = Command::new("ssh-keygen")
        .arg("-q")
        .arg("-s")
        .arg(authority)
        .args(["-I", "test"])
        .args(options)
        .arg(key.with_extension("pub"))
        .status()
        .expect("ssh-keygen (openssh-client)");
    assert!(status.success(), "ssh-keygen -s failed");
    let mut certificate = key.as_os_str().to_owned();
    certificate.push("-cert.pub");
    PathBuf::from(certificate)
}

#[test]
fn targets_behind_a_jump_host_are_reached_through_it_and_each_is_reported() {
    let (hosts, jump) = Hosts::start_behind_jump(&[10, 11]);
    let targets = [("node-a", 10), ("node-b", 11)];
    let command = "echo \"hello from $WORKFLOW_TARGET_NAME at $WORKFLOW_TARGET_IP\"";
    let run = hosts.run(&targets, &strs(&jump.args()), command);
    assert_eq!(run.code, Some(0), "{}", run.log);
    assert!(
        run.report
            .starts_with("targets 2: 2 ok, 0 failed, 0 unreachable\n"),
        "{}",
        run.report
    );
    assert!(run.line_of("node-a").starts_with("OK node-a ("));
    assert!(
        run.log.contains("[node-a] hello from node-a at 127.0.0.10"),
        "{}",
        run.log
    );
    assert!(
        run.log.contains("[node-b] hello from node-b at 127.0.0.11"),
        "{}",
        run.log
    );
    // One connection to the jump host for the whole run.
    assert_eq!(jump.connections.load(Ordering::SeqCst), 1);

    // Without the jump host there is no way to them.
    let run = hosts.run(&targets, &[], "true");
    assert_eq!(run.code, Some(1), "{}", run.log);
    let line = run.line_of("node-a");
    assert!(
        line.starts_with(&format!(
            "UNREACHABLE node-a: connect 127.0.0.10:{}: ",
            hosts.port
        )),
        "{line}"
    );
}

#[test]
fn a_target_the_jump_host_cannot_reach_is_unreachable_and_the_others_still_run() {
    let (hosts, jump) = Hosts::start_behind_jump(&[10]);
    let run = hosts.run(
        &[("node-a", 10), ("node-gone", 12)],
        &strs(&jump.args()),
        "true",
    );
    assert_eq!(run.code, Some(1), "{}", run.log);
    assert!(
        run.report
            .starts_with("targets 2: 1 ok, 0 failed, 1 unreachable\n"),
        "{}",
        run.report
    );
    assert!(run.line_of("node-a").starts_with("OK node-a"));
    assert_eq!(
        run.line_of("node-gone"),
        format!(
            "UNREACHABLE node-gone: jump host 127.0.0.2:{} could not reach 127.0.0.12:{}: \
             the channel was refused (ConnectFailed)",
            jump.port, hosts.port
        )
    );
}

#[test]
fn a_jump_hosts_own_host_key_is_checked_against_its_own_known_hosts_entry() {
    let (hosts, jump) = Hosts::start_behind_jump(&[10, 11]);
    // known_hosts lists the targets' key, and an impostor's for the jump host.
    keygen(&hosts.path("impostor"));
    let impostor = std::fs::read_to_string(hosts.path("impostor.pub")).expect("key");
    let target_key = std::fs::read_to_string(hosts.path("host_key.pub")).expect("key");
    std::fs::write(
        hosts.path("known_hosts"),
        format!(
            "[127.0.0.10]:{port} {target_key}[127.0.0.11]:{port} {target_key}[127.0.0.2]:{} {impostor}",
            jump.port,
            port = hosts.port
        ),
    )
    .expect("known_hosts");
    let run = hosts.run(
        &[("node-a", 10), ("node-b", 11)],
        &strs(&jump.args()),
        "true",
    );
    assert_eq!(run.code, Some(1), "{}", run.log);
    for target in ["node-a", "node-b"] {
        let line = run.line_of(target);
        assert!(
            line.starts_with(&format!(
                "UNREACHABLE {target}: jump host 127.0.0.2:{}: host key mismatch: 127.0.0.2 offered ssh-ed25519 SHA256:",
                jump.port
            )),
            "{line}"
        );
    }
    // The jump host is asked once, not once per target.
    assert_eq!(jump.connections.load(Ordering::SeqCst), 1);
}

#[test]
fn a_jump_host_that_is_down_makes_every_target_unreachable_naming_it() {
    let (hosts, jump) = Hosts::start_behind_jump(&[10, 11]);
    let args = [
        "--jump-host",
        "127.0.0.9",
        "--jump-port",
        &jump.port.to_string(),
    ]
    .map(String::from);
    let run = hosts.run(&[("node-a", 10), ("node-b", 11)], &strs(&args), "true");
    assert_eq!(run.code, Some(1), "{}", run.log);
    for target in ["node-a", "node-b"] {
        let line = run.line_of(target);
        assert!(
            line.starts_with(&format!(
                "UNREACHABLE {target}: jump host 127.0.0.9:{port}: connect 127.0.0.9:{port}: ",
                port = jump.port
            )),
            "{line}"
        );
        assert!(line.contains("refused"), "{line}");
    }
}

#[test]
fn a_jump_host_that_is_one_of_the_targets_is_refused_before_connecting() {
    let hosts = Hosts::start(&[2, 3]);
    let run = hosts.run(
        &[("node-1", 2), ("bastion", 3)],
        &["--jump-host", "127.0.0.3"],
        "touch /tmp/should-not-run",
    );
    assert_eq!(run.code, Some(2), "{}", run.log);
    assert!(
        run.report.starts_with(
            "workflow-runner: the jump host 127.0.0.3 is also the target bastion: a run does not \
             reach a target through itself"
        ),
        "{}",
        run.report
    );
}

#[test]
fn a_user_certificate_logs_in_and_one_for_another_key_is_refused_before_connecting() {
    let hosts = Hosts::start_with(&[2], |dir| {
        keygen(&dir.join("user_ca"));
        sign(
            &dir.join("user_ca"),
            &dir.join("client_key"),
            &["-n", &user()],
        );
        format!("TrustedUserCAKeys {}\n", dir.join("user_ca.pub").display())
    });
    // The key alone no longer logs in: only its certificate does.
    std::fs::write(hosts.path("authorized_keys"), "").expect("authorized_keys");
    let certificate = hosts.path("client_key-cert.pub");
    let with = ["--certificate", certificate.to_str().expect("utf-8")];
    let run = hosts.run(&[("node-1", 2)], &with, "echo certified");
    assert_eq!(run.code, Some(0), "{}", run.log);
    assert!(run.log.contains("[node-1] certified"), "{}", run.log);
    let run = hosts.run(&[("node-1", 2)], &[], "true");
    assert!(
        run.line_of("node-1")
            .contains("did not accept the key for user"),
        "{}",
        run.report
    );

    // A certificate of another key: refused before any connection.
    keygen(&hosts.path("other_key"));
    let other = sign(
        &hosts.path("user_ca"),
        &hosts.path("other_key"),
        &["-n", &user()],
    );
    let run = hosts.run(
        &[("node-1", 2)],
        &["--certificate", other.to_str().expect("utf-8")],
        "true",
    );
    assert_eq!(run.code, Some(2), "{}", run.log);
    assert!(
        run.report.starts_with(&format!(
            "workflow-runner: the SSH certificate {} cannot be used: it is a certificate for the key SHA256:",
            other.display()
        )),
        "{}",
        run.report
    );
    assert!(
        run.report.contains("a certificate for another key"),
        "{}",
        run.report
    );

    // The key's own certificate, expired: refused before any connection too.
    let expired = sign(
        &hosts.path("user_ca"),
        &hosts.path("client_key"),
        &["-n", &user(), "-V", "-2d:-1d"],
    );
    let run = hosts.run(
        &[("node-1", 2)],
        &["--certificate", expired.to_str().expect("utf-8")],
        "true",
    );
    assert_eq!(run.code, Some(2), "{}", run.log);
    assert!(
        run.report.contains("cannot be used: it expired at "),
        "{}",
        run.report
    );
}

#[test]
fn a_host_certificate_is_trusted_through_its_authority_and_refused_without_it() {
    let hosts = Hosts::start_with(&[2, 3], |dir| {
        keygen(&dir.join("host_ca"));
        let certificate = sign(
            &dir.join("host_ca"),
            &dir.join("host_key"),
            &["-h", "-n", "127.0.0.2"],
        );
        format!("HostCertificate {}\n", certificate.display())
    });
    let authority = std::fs::read_to_string(hosts.path("host_ca.pub")).expect("key");
    let trust =
        |line: String| std::fs::write(hosts.path("known_hosts"), line).expect("known_hosts");

    trust(format!(
        "@cert-authority [127.0.0.*]:{} {authority}",
        hosts.port
    ));
    let run = hosts.run(&[("node-1", 2)], &[], "true");
    assert_eq!(run.code, Some(0), "{}", run.log);
    // Signed for 127.0.0.2 only: the same certificate does not vouch for 127.0.0.3.
    let run = hosts.run(&[("node-3", 3)], &[], "true");
    assert!(
        run.line_of("node-3").starts_with(
            "UNREACHABLE node-3: host certificate refused: 127.0.0.3's certificate (id \"test\") is for [\"127.0.0.2\"]"
        ),
        "{}",
        run.report
    );

    // No authority listed: the host's key is unknown.
    trust(String::new());
    let run = hosts.run(&[("node-1", 2)], &[], "true");
    assert!(
        run.line_of("node-1")
            .starts_with("UNREACHABLE node-1: host key not trusted: ssh-ed25519 SHA256:"),
        "{}",
        run.report
    );
    // Another authority listed: the certificate's is not trusted.
    keygen(&hosts.path("other_ca"));
    let other = std::fs::read_to_string(hosts.path("other_ca.pub")).expect("key");
    trust(format!("@cert-authority * {other}"));
    let run = hosts.run(&[("node-1", 2)], &[], "true");
    assert!(
        run.line_of("node-1").starts_with(
            "UNREACHABLE node-1: host certificate not trusted: 127.0.0.2 / node-1 offered a certificate signed by SHA256:"
        ),
        "{}",
        run.report
    );
    // The authority revoked: refused although it is listed.
    trust(format!(
        "@cert-authority * {authority}@revoked * {authority}"
    ));
    let run = hosts.run(&[("node-1", 2)], &[], "true");
    assert!(
        run.line_of("node-1").starts_with(
            "UNREACHABLE node-1: host key revoked: 127.0.0.2 offered certificate signed by SHA256:"
        ),
        "{}",
        run.report
    );
}

#[test]
fn a_revoked_host_key_is_refused_even_when_it_is_also_listed() {
    let hosts = Hosts::start(&[2]);
    let host_key = std::fs::read_to_string(hosts.path("host_key.pub")).expect("key");
    let mut known = std::fs::OpenOptions::new()
        .append(true)
        .open(hosts.path("known_hosts"))
        .expect("known_hosts");
    write!(known, "@revoked * {host_key}").expect("known_hosts");
    let run = hosts.run(&[("node-1", 2)], &[], "touch /tmp/should-not-run");
    assert_eq!(run.code, Some(1), "{}", run.log);
    assert!(
        run.line_of("node-1")
            .starts_with("UNREACHABLE node-1: host key revoked: 127.0.0.2 offered key SHA256:"),
        "{}",
        run.report
    );
    assert!(run.line_of("node-1").ends_with(&format!(
        "which line 2 of {} revokes",
        hosts.path("known_hosts").display()
    )));
}

#[test]
fn many_targets_through_one_jump_host_take_about_as_long_as_direct() {
    // 32 targets on 8 addresses (sshd listens on at most 16).
    let addresses: Vec<u8> = (20..28).collect();
    let names: Vec<(String, u8)> = (0..32)
        .map(|i| (format!("node-{i}"), addresses[i % addresses.len()]))
        .collect();
    let targets: Vec<(&str, u8)> = names.iter().map(|(n, a)| (n.as_str(), *a)).collect();

    let direct = Hosts::start(&addresses);
    let run = direct.run(&targets, &["--parallel", "16"], "true");
    assert_eq!(run.code, Some(0), "{}", run.log);
    let direct_took = run.took;

    let (hosts, jump) = Hosts::start_behind_jump(&addresses);
    let mut args = jump.args();
    args.extend(["--parallel".into(), "16".into()]);
    let run = hosts.run(&targets, &strs(&args), "true");
    assert_eq!(run.code, Some(0), "{}", run.log);
    assert!(
        run.report.starts_with("targets 32: 32 ok"),
        "{}",
        run.report
    );
    assert_eq!(jump.connections.load(Ordering::SeqCst), 1);
    eprintln!(
        "32 targets, 16 at a time: {direct_took:?} direct, {:?} through the jump host",
        run.took
    );
    assert!(run.took < Duration::from_secs(20), "took {:?}", run.took);
}
