//! The runner against real target hosts: an OpenSSH server (Debian's `openssh-server`) on
//! loopback addresses of its own (127.0.0.2, 127.0.0.3, ...), with its own host key and the
//! test's client key, and hostile servers on others (a handshake that stalls, a flood of banner
//! lines, a peer that does not speak SSH). Nothing leaves the loopback interface.

use std::io::{BufRead as _, Write as _};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
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
        let sshd = ["/usr/sbin/sshd", "/usr/bin/sshd"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .unwrap_or_else(|| {
                panic!("no sshd: install openssh-server (apt-get install openssh-server)")
            });
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
            "Port {port}\n{listen}HostKey {dir}/host_key\nAuthorizedKeysFile {dir}/authorized_keys\n\
             PidFile none\nUsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
             PermitRootLogin prohibit-password\nStrictModes no\nLogLevel ERROR\nMaxStartups 100\n",
            dir = dir.path().display()
        );
        std::fs::write(dir.path().join("sshd_config"), config).expect("sshd_config");
        // sshd's privilege separation directory, as its service would create it.
        let _ = std::fs::create_dir_all("/run/sshd");
        let child = Command::new(sshd)
            .args(["-D", "-e", "-f"])
            .arg(dir.path().join("sshd_config"))
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

fn keygen(path: &Path) {
    let status = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .status()
        .expect("ssh-keygen (openssh-client)");
    assert!(status.success(), "ssh-keygen failed");
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
        &["--connect-timeout", "2"],
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
            "UNREACHABLE stalled: no SSH session with 127.0.0.5:{} within 2 s (connect, handshake and login)",
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
    // In parallel: the three bad hosts together cost one connect timeout, not three.
    assert!(run.took < Duration::from_secs(6), "took {:?}", run.took);
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
    // Twelve targets on one host, each holding a slot for 1 s: with 4 at a time, three rounds.
    let hosts = Hosts::start(&[2]);
    let targets: Vec<(String, u8)> = (0..12).map(|i| (format!("node-{i}"), 2)).collect();
    let targets: Vec<(&str, u8)> = targets.iter().map(|(n, h)| (n.as_str(), *h)).collect();
    let run = hosts.run(&targets, &["--parallel", "4"], "sleep 1");
    assert_eq!(run.code, Some(0), "{}", run.log);
    assert!(
        run.report.starts_with("targets 12: 12 ok"),
        "{}",
        run.report
    );
    assert!(run.took >= Duration::from_secs(3), "took {:?}", run.took);
    assert!(run.took < Duration::from_secs(8), "took {:?}", run.took);
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
