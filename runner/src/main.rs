//! `workflow-runner`: runs a step's command on each of its Workflow's targets over SSH.
//!
//! A step whose command is `workflow-runner -- <command>` (or `workflow-runner` with the command
//! in `WORKFLOW_SSH_COMMAND`) logs in to every target in `/etc/workflow/targets.json` (the file
//! the operator mounts into every step pod), a bounded number at a time, runs the command there
//! with `/bin/sh -c`, and reports per target: the log (`kubectl logs`) gets each target's output
//! line by line, prefixed with its name; the termination message gets one line per target in
//! the check-output convention the plugins' success logic reads (`OK node-1 (0.21 s)`,
//! `FAIL node-2: exit code 3 after 1.20 s: <last line>`, `UNREACHABLE node-3: <why>`).
//!
//! Credentials come from files, never from arguments or the environment: the private key of a
//! `kubernetes.io/ssh-auth` Secret (`ssh-privatekey`), its user certificate when the Secret has
//! one (`ssh-certificate`) and a `known_hosts` file ([`known_hosts`]: plain keys,
//! `@cert-authority` and `@revoked` lines), all mounted at `/etc/workflow/ssh/` by the group's
//! pod template. With `--jump-host` every target is reached through that host ([`ssh::Jump`]).
//!
//! Other modes, for the built-in types that make and take out Nodes: `--copy` delivers files of
//! the step pod to every target first (streamed, checked by SHA-256, renamed into place);
//! `--join` mints a bootstrap token for the run and gives every target a bootstrap kubeconfig
//! on its standard input ([`join`]); `--node-ready`, `--drain` and `--delete-nodes` act on each
//! target's Node through the API server instead of logging in ([`nodes`], [`drain`]).
//!
//! Exit code: 0 when the command succeeded on every target, 1 when it failed on or could not
//! reach some (the message names them), 2 when the runner could not run at all (no key, no
//! targets file, bad arguments).

mod drain;
mod join;
mod known_hosts;
mod nodes;
mod output;
mod report;
mod ssh;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use futures::StreamExt as _;
use workflow_model::Target;

use crate::known_hosts::{CertificateProblem, KnownHosts};
use crate::output::Log;
use crate::report::{Counts, TargetResult};
use crate::ssh::{HostKeyPolicy, Jump, JumpHost, Session};

/// Runs a command on each of the Workflow's targets over SSH and reports per target.
#[derive(Debug, Parser)]
#[command(name = "workflow-runner", version)]
struct Args {
    /// The targets, as the operator writes them: a JSON list of `{name, ip, role}`.
    #[arg(
        long,
        env = "WORKFLOW_TARGETS_FILE",
        default_value = "/etc/workflow/targets.json"
    )]
    targets_file: PathBuf,
    /// The SHA-256 (hex) of the targets file as the operator wrote it for this step: a file
    /// with other content (its ConfigMap replaced by someone else) is refused.
    #[arg(long, env = "WORKFLOW_TARGETS_SHA256")]
    targets_sha256: Option<String>,
    /// Only the targets of these roles (comma-separated); all when empty.
    #[arg(
        long,
        env = "WORKFLOW_SSH_ROLES",
        value_delimiter = ',',
        default_value = ""
    )]
    roles: Vec<String>,
    /// The user to log in as.
    #[arg(long, env = "WORKFLOW_SSH_USER", default_value = "root")]
    user: String,
    /// The targets' SSH port.
    #[arg(long, env = "WORKFLOW_SSH_PORT", default_value_t = 22)]
    port: u16,
    /// The private key (OpenSSH or PEM format, not encrypted).
    #[arg(
        long,
        env = "WORKFLOW_SSH_KEY",
        default_value = "/etc/workflow/ssh/ssh-privatekey"
    )]
    key: PathBuf,
    /// The user certificate for the key (an OpenSSH `-cert.pub` file), presented at login when
    /// the file exists; a certificate for another key refuses the run.
    #[arg(
        long,
        env = "WORKFLOW_SSH_CERTIFICATE",
        default_value = "/etc/workflow/ssh/ssh-certificate"
    )]
    certificate: PathBuf,
    /// The known hosts: a target's host key must be listed for its address or its name (or
    /// its certificate signed by an `@cert-authority` listed for it), and not be `@revoked`.
    #[arg(
        long,
        env = "WORKFLOW_SSH_KNOWN_HOSTS",
        default_value = "/etc/workflow/ssh/known_hosts"
    )]
    known_hosts: PathBuf,
    /// `known-hosts` (the default) or `accept-any`: trust any host key (no protection from a
    /// machine in the middle; for hosts whose keys are not known yet).
    #[arg(
        long,
        env = "WORKFLOW_SSH_HOST_KEY_POLICY",
        default_value = "known-hosts"
    )]
    host_key_policy: String,
    /// A host to reach every target through (an IP address or a host name): the runner logs
    /// in there with the same key and connects to each target through it (no program runs
    /// there). Its host key must be in the same known hosts, under this address.
    #[arg(long, env = "WORKFLOW_SSH_JUMP_HOST")]
    jump_host: Option<String>,
    /// The user to log in to the jump host as (default: `--user`).
    #[arg(long, env = "WORKFLOW_SSH_JUMP_USER")]
    jump_user: Option<String>,
    /// The jump host's SSH port.
    #[arg(long, env = "WORKFLOW_SSH_JUMP_PORT", default_value_t = 22)]
    jump_port: u16,
    /// How many targets are worked on at once.
    #[arg(long, env = "WORKFLOW_SSH_PARALLEL", default_value_t = 16)]
    parallel: usize,
    /// Seconds to connect, check the host key and log in, per target.
    #[arg(long, env = "WORKFLOW_SSH_CONNECT_TIMEOUT", default_value_t = 10)]
    connect_timeout: u64,
    /// Seconds the command may run on a target.
    #[arg(long, env = "WORKFLOW_SSH_COMMAND_TIMEOUT", default_value_t = 300)]
    command_timeout: u64,
    /// Instead of running a command over SSH: check that each target's Node object (the Node
    /// named as the target) is Ready, through the API server with the pod's service account
    /// (which must be allowed to get nodes), waiting up to `--node-ready-timeout`.
    #[arg(long, env = "WORKFLOW_CHECK_NODE_READY")]
    node_ready: bool,
    /// Seconds `--node-ready` waits for the Nodes to be Ready.
    #[arg(long, env = "WORKFLOW_NODE_READY_TIMEOUT", default_value_t = 300)]
    node_ready_timeout: u64,
    /// With `--node-ready`: once a Node is Ready, remove this taint from it (the taint a
    /// joining Node registers with, so that nothing lands on it before it is Ready).
    #[arg(long, env = "WORKFLOW_NODE_READY_REMOVE_TAINT")]
    remove_taint: Option<String>,
    /// Mint a bootstrap token for this run (a Secret in kube-system, deleted when the run ends)
    /// and send every target, on its standard input, a bootstrap kubeconfig with it: the input
    /// of setup's join-cluster script. Needs the service account deploy/join/ grants.
    #[arg(long, env = "WORKFLOW_JOIN", conflicts_with = "stdin_file")]
    join: bool,
    /// With `--join`: the API server's URL as the targets reach it (default: the address the
    /// `default/kubernetes` Endpoints list).
    #[arg(long, env = "WORKFLOW_JOIN_API_SERVER")]
    join_api_server: Option<String>,
    /// With `--join`: seconds the bootstrap token is valid for, should the runner not delete it.
    #[arg(long, env = "WORKFLOW_JOIN_TOKEN_TTL", default_value_t = 900)]
    join_token_ttl: u64,
    /// Instead of running a command over SSH: cordon each target's Node and evict its pods
    /// through the Eviction API (PodDisruptionBudgets respected), as `kubectl drain` does.
    #[arg(long, env = "WORKFLOW_DRAIN")]
    drain: bool,
    /// Seconds a Node's drain may take.
    #[arg(long, env = "WORKFLOW_DRAIN_TIMEOUT", default_value_t = 300)]
    drain_timeout: u64,
    /// The grace period of evicted pods (their own when not given).
    #[arg(long, env = "WORKFLOW_DRAIN_GRACE_PERIOD")]
    drain_grace_period: Option<i64>,
    /// Evict pods with emptyDir volumes too (their data is lost).
    #[arg(long, env = "WORKFLOW_DRAIN_DELETE_EMPTYDIR_DATA")]
    drain_delete_emptydir_data: bool,
    /// Evict pods no controller manages too (nothing makes them again).
    #[arg(long, env = "WORKFLOW_DRAIN_FORCE")]
    drain_force: bool,
    /// Instead of running a command over SSH: delete each target's Node object.
    #[arg(long, env = "WORKFLOW_DELETE_NODES")]
    delete_nodes: bool,
    /// Instead of running a command over SSH: make each target's Node schedulable again when
    /// this step's group cordoned it (`--drain` recorded it on the Node); any other Node is
    /// left as it is.
    #[arg(long, env = "WORKFLOW_UNCORDON")]
    uncordon: bool,
    /// A file sent to the command's standard input on every target (at most 1 MiB), e.g. a
    /// script from a ConfigMap the pod template mounts; without it the input is empty.
    #[arg(long, env = "WORKFLOW_SSH_STDIN_FILE")]
    stdin_file: Option<PathBuf>,
    /// Files of the step pod (the step image, a ConfigMap or Secret mount, a volume) to deliver
    /// to every target before the command runs, as `SOURCE:DESTINATION[:MODE]` (mode octal,
    /// default 0644), comma-separated: streamed over the session, checked against their
    /// SHA-256 on the target and renamed into place; one already there is not sent again.
    #[arg(long = "copy", env = "WORKFLOW_SSH_COPY", value_delimiter = ',')]
    copies: Vec<String>,
    /// Bytes of one target's output copied to the log; the rest is counted.
    #[arg(long, env = "WORKFLOW_SSH_LOG_LIMIT", default_value_t = 64 * 1024)]
    log_limit: usize,
    /// Where the per-target report goes (the container's termination message); empty: nowhere.
    #[arg(
        long,
        env = "WORKFLOW_TERMINATION_LOG",
        default_value = "/dev/termination-log"
    )]
    termination_log: String,
    /// The command, run by `/bin/sh -c` on each target (or `WORKFLOW_SSH_COMMAND`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    command: Vec<String>,
}

/// Why the runner could not run at all.
#[derive(Debug, thiserror::Error)]
enum Error {
    /// No targets file, or not the operator's format.
    #[error("read the targets from {path}: {reason}")]
    Targets { path: PathBuf, reason: String },
    /// No usable private key.
    #[error(
        "no usable SSH key at {path}: {reason} (create the kubernetes.io/ssh-auth Secret \
         workflow-ssh in the group's namespace, which step pods mount by default, or mount one \
         at /etc/workflow/ssh with the group's spec.podTemplate)"
    )]
    Key { path: PathBuf, reason: String },
    /// The known hosts file is missing while the policy needs it.
    #[error(
        "no known_hosts file at {0} (add a known_hosts key to the SSH Secret, or set \
         WORKFLOW_SSH_HOST_KEY_POLICY=accept-any to trust any host key)"
    )]
    KnownHosts(PathBuf),
    /// The known hosts file cannot be read.
    #[error("read the known hosts {}: {source}", path.display())]
    ReadKnownHosts {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The user certificate cannot be read or is not one for the key.
    #[error(
        "the SSH certificate {} cannot be used: {reason} (put the certificate of the Secret's \
         ssh-privatekey in its ssh-certificate, or remove it)",
        path.display()
    )]
    Certificate {
        path: PathBuf,
        reason: CertificateRefusal,
    },
    /// The jump host is one of the targets the run works on.
    #[error(
        "the jump host {address} is also the target {target}: a run does not reach a target \
         through itself; take it out of the targets or the jump host out of ssh.jumpHost"
    )]
    JumpIsTarget { address: String, target: String },
    /// Arguments that make no sense.
    #[error("{0}")]
    Usage(String),
    /// The API server cannot be reached the way `--node-ready`, `--drain` and
    /// `--delete-nodes` need.
    #[error(transparent)]
    Api(#[from] nodes::ApiError),
    /// The run's bootstrap token could not be made (`--join`).
    #[error(transparent)]
    Join(#[from] join::JoinError),
}

/// Why the user certificate is refused.
#[derive(Debug, thiserror::Error)]
enum CertificateRefusal {
    /// Not an OpenSSH certificate.
    #[error("{0}")]
    Unreadable(String),
    /// The certificate certifies another key than the private key's.
    #[error(
        "it is a certificate for the key {certified}, but the private key is {key}: a \
         certificate for another key"
    )]
    AnotherKey { certified: String, key: String },
    /// It is not valid now, or not a user certificate.
    #[error("it {0}")]
    Invalid(CertificateProblem),
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.node_ready || args.drain || args.delete_nodes || args.uncordon {
        return through_api(&args);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => return refuse(&args, &Error::Usage(format!("start the runtime: {error}"))),
    };
    match prepare(&args) {
        Ok((session, targets)) if args.join => join_run(&args, &runtime, session, targets),
        Ok((session, targets)) => runtime.block_on(run(&args, session, targets)),
        Err(error) => refuse(&args, &error),
    }
}

/// `--join`: the run with a bootstrap token of its own, minted before and deleted after.
fn join_run(
    args: &Args,
    runtime: &tokio::runtime::Runtime,
    mut session: Session,
    targets: Vec<Target>,
) -> ExitCode {
    let ttl = args.join_token_ttl.max(60);
    let minted = nodes::Api::in_cluster()
        .map_err(join::JoinError::from)
        .and_then(|api| {
            join::mint(
                &api,
                Duration::from_secs(ttl),
                args.join_api_server.as_deref(),
            )
            .map(|bootstrap| (api, bootstrap))
        });
    let (api, bootstrap) = match minted {
        Ok(minted) => minted,
        Err(why) => return refuse(args, &Error::Join(why)),
    };
    println!(
        "bootstrap token {} made for this run (expires in {ttl} s unless deleted first)",
        bootstrap.secret
    );
    session.command = format!("{}{}", bootstrap.assignments, session.command);
    session.stdin = Arc::new(bootstrap.kubeconfig.clone());
    let code = runtime.block_on(run(args, session, targets));
    match join::revoke(&api, &bootstrap) {
        Ok(()) => eprintln!("bootstrap token {} deleted", bootstrap.secret),
        Err(why) => eprintln!(
            "workflow-runner: the bootstrap token {} was not deleted ({why}); it expires by itself",
            bootstrap.secret
        ),
    }
    code
}

/// The session settings and the targets to work on, or why there are none.
fn prepare(args: &Args) -> Result<(Session, Vec<Target>), Error> {
    let command = match (
        args.command.as_slice(),
        std::env::var("WORKFLOW_SSH_COMMAND"),
    ) {
        ([], Ok(command)) if !command.trim().is_empty() => command,
        ([], _) => {
            return Err(Error::Usage(
                "no command: give it after `--` or in WORKFLOW_SSH_COMMAND".into(),
            ));
        }
        (words, _) => words.join(" "),
    };
    if args.parallel == 0 || args.connect_timeout == 0 || args.command_timeout == 0 {
        return Err(Error::Usage(
            "--parallel, --connect-timeout and --command-timeout must be at least 1".into(),
        ));
    }
    let host_keys = match args.host_key_policy.as_str() {
        "known-hosts" => {
            if !args.known_hosts.is_file() {
                return Err(Error::KnownHosts(args.known_hosts.clone()));
            }
            let known =
                KnownHosts::read(&args.known_hosts).map_err(|source| Error::ReadKnownHosts {
                    path: args.known_hosts.clone(),
                    source,
                })?;
            HostKeyPolicy::KnownHosts(Arc::new(known))
        }
        "accept-any" => HostKeyPolicy::AcceptAny,
        other => {
            return Err(Error::Usage(format!(
                "host key policy {other:?}: use known-hosts or accept-any"
            )));
        }
    };
    let key = russh::keys::load_secret_key(&args.key, None).map_err(|e| Error::Key {
        path: args.key.clone(),
        reason: match e {
            russh::keys::Error::KeyIsEncrypted => {
                "the key is encrypted (give it without a passphrase)".into()
            }
            other => other.to_string(),
        },
    })?;
    let certificate = read_certificate(&args.certificate, &key)?;
    let secrets = secret_mounts(args);
    let stdin = match &args.stdin_file {
        Some(path) => {
            refuse_secret(path, &secrets, "the stdin file")?;
            read_stdin_file(path)?
        }
        None => Vec::new(),
    };
    let targets = read_targets(args)?;
    let jump = jump_host(args, &targets)?;
    let copies = args
        .copies
        .iter()
        .map(|spec| copy_of(spec, &secrets))
        .collect::<Result<Vec<_>, _>>()?;
    let session = Session {
        user: args.user.clone(),
        port: args.port,
        key: Arc::new(key),
        certificate: certificate.map(Arc::new),
        host_keys,
        connect_timeout: Duration::from_secs(args.connect_timeout),
        command_timeout: Duration::from_secs(args.command_timeout),
        command,
        stdin: Arc::new(stdin),
        copies: Arc::new(copies),
        jump: jump.map(|host| Arc::new(Jump::new(host))),
    };
    Ok((session, targets))
}

/// The user certificate at `path` when there is one, checked against `key`: a certificate of
/// another key, an expired one or a host certificate refuses the run before any connection.
fn read_certificate(
    path: &std::path::Path,
    key: &russh::keys::PrivateKey,
) -> Result<Option<russh::keys::Certificate>, Error> {
    if !path.exists() {
        return Ok(None);
    }
    let refused = |reason| Error::Certificate {
        path: path.to_path_buf(),
        reason,
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| refused(CertificateRefusal::Unreadable(e.to_string())))?;
    let certificate = russh::keys::Certificate::from_openssh(text.trim()).map_err(|e| {
        refused(CertificateRefusal::Unreadable(format!(
            "not an OpenSSH certificate ({e})"
        )))
    })?;
    if certificate.public_key() != key.public_key().key_data() {
        let sha256 = |k: &russh::keys::ssh_key::public::KeyData| {
            k.fingerprint(russh::keys::HashAlg::Sha256).to_string()
        };
        return Err(refused(CertificateRefusal::AnotherKey {
            certified: sha256(certificate.public_key()),
            key: sha256(key.public_key().key_data()),
        }));
    }
    let user = russh::keys::ssh_key::certificate::CertType::User;
    known_hosts::check_certificate(&certificate, user, ssh::unix_now())
        .map_err(|problem| refused(CertificateRefusal::Invalid(problem)))?;
    Ok(Some(certificate))
}

/// The jump host of `--jump-host`, unless none is given; refused when it is one of `targets`.
fn jump_host(args: &Args, targets: &[Target]) -> Result<Option<JumpHost>, Error> {
    let Some(address) = args
        .jump_host
        .as_deref()
        .map(str::trim)
        .filter(|a| !a.is_empty())
    else {
        return Ok(None);
    };
    if let Some(target) = targets
        .iter()
        .find(|t| t.ip.trim().eq_ignore_ascii_case(address) || t.name.eq_ignore_ascii_case(address))
    {
        return Err(Error::JumpIsTarget {
            address: address.to_owned(),
            target: target.name.clone(),
        });
    }
    let user = args
        .jump_user
        .as_deref()
        .filter(|u| !u.trim().is_empty())
        .unwrap_or(&args.user);
    Ok(Some(JumpHost {
        address: address.to_owned(),
        port: args.jump_port,
        user: user.to_owned(),
    }))
}

/// What must never reach a target: the SSH key and known hosts files, the folder the fleet's
/// key is mounted at, and the service account's token folders. As given and as the kernel
/// resolves them (a Secret volume is links to a hidden folder).
fn secret_mounts(args: &Args) -> Vec<PathBuf> {
    [
        args.key.clone(),
        args.certificate.clone(),
        args.known_hosts.clone(),
    ]
    .into_iter()
    .chain(
        [
            "/etc/workflow/ssh",
            "/var/run/secrets/kubernetes.io",
            "/run/secrets/kubernetes.io",
        ]
        .map(PathBuf::from),
    )
    .flat_map(|p| [std::fs::canonicalize(&p).ok(), Some(p)])
    .flatten()
    .collect()
}

/// Refuses `path` (`what`) when it is, or resolves to, a file under one of `secrets`.
fn refuse_secret(path: &std::path::Path, secrets: &[PathBuf], what: &str) -> Result<(), Error> {
    let resolved = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    if let Some(root) = secrets
        .iter()
        .find(|root| path.starts_with(root) || resolved.starts_with(root))
    {
        return Err(Error::Usage(format!(
            "{what} {} is under {}, which holds the SSH key or the service account's token: it is never sent to a target",
            path.display(),
            root.display()
        )));
    }
    Ok(())
}

/// A `--copy` of `SOURCE:DESTINATION[:MODE]`, its source read once for its SHA-256.
fn copy_of(spec: &str, secrets: &[PathBuf]) -> Result<ssh::Copy, Error> {
    use sha2::Digest as _;
    use std::io::Read as _;
    let bad = |why: &str| Error::Usage(format!("--copy {spec:?}: {why}"));
    let mut parts = spec.trim().splitn(3, ':');
    let (from, to) = match (parts.next(), parts.next()) {
        (Some(from), Some(to)) if !from.is_empty() && to.starts_with('/') => (from, to),
        _ => {
            return Err(bad(
                "give SOURCE:DESTINATION[:MODE], the destination an absolute path",
            ));
        }
    };
    let mode = parts.next().unwrap_or("0644");
    if mode.is_empty() || mode.len() > 4 || !mode.chars().all(|c| ('0'..='7').contains(&c)) {
        return Err(bad("the mode must be octal, e.g. 0755"));
    }
    refuse_secret(std::path::Path::new(from), secrets, "--copy source")?;
    let mut file = std::fs::File::open(from).map_err(|e| bad(&format!("open {from}: {e}")))?;
    let mut hasher = sha2::Sha256::new();
    let mut buffer = vec![0u8; 64 * 1024];
    let mut size = 0u64;
    loop {
        let n = file
            .read(&mut buffer)
            .map_err(|e| bad(&format!("read {from}: {e}")))?;
        if n == 0 {
            break;
        }
        size += n as u64;
        hasher.update(&buffer[..n]);
    }
    Ok(ssh::Copy {
        from: PathBuf::from(from),
        to: to.to_owned(),
        mode: mode.to_owned(),
        sha256: hex::encode(hasher.finalize()),
        size,
    })
}

/// The most a stdin file may hold: it is sent whole to every target.
const STDIN_LIMIT: u64 = 1024 * 1024;

fn read_stdin_file(path: &std::path::Path) -> Result<Vec<u8>, Error> {
    use std::io::Read as _;
    let failed =
        |reason: String| Error::Usage(format!("read the stdin file {}: {reason}", path.display()));
    let file = std::fs::File::open(path).map_err(|e| failed(e.to_string()))?;
    let mut bytes = Vec::new();
    file.take(STDIN_LIMIT + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| failed(e.to_string()))?;
    if bytes.len() as u64 > STDIN_LIMIT {
        return Err(failed(format!("larger than {STDIN_LIMIT} bytes")));
    }
    Ok(bytes)
}

fn read_targets(args: &Args) -> Result<Vec<Target>, Error> {
    let failed = |reason: String| Error::Targets {
        path: args.targets_file.clone(),
        reason,
    };
    let text = std::fs::read_to_string(&args.targets_file).map_err(|e| failed(e.to_string()))?;
    if let Some(want) = args.targets_sha256.as_deref().filter(|w| !w.is_empty()) {
        use sha2::Digest as _;
        let have = hex::encode(sha2::Sha256::digest(text.as_bytes()));
        if !have.eq_ignore_ascii_case(want.trim()) {
            return Err(failed(format!(
                "it is not the list the operator wrote for this step (its SHA-256 is {have}, the step's is {want}): its ConfigMap was replaced"
            )));
        }
    }
    let targets: Vec<Target> = serde_json::from_str(&text).map_err(|e| failed(e.to_string()))?;
    let roles: Vec<&str> = args
        .roles
        .iter()
        .map(|r| r.trim())
        .filter(|r| !r.is_empty())
        .collect();
    let chosen: Vec<Target> = targets
        .into_iter()
        .filter(|t| roles.is_empty() || roles.iter().any(|r| r.eq_ignore_ascii_case(&t.role)))
        .collect();
    if chosen.is_empty() {
        return Err(failed(if roles.is_empty() {
            "no targets".into()
        } else {
            format!("no target has a role of {}", roles.join(", "))
        }));
    }
    Ok(chosen)
}

async fn run(args: &Args, session: Session, targets: Vec<Target>) -> ExitCode {
    let log = Log {
        limit: args.log_limit,
    };
    let session = &session;
    let mut results: Vec<TargetResult> = futures::stream::iter(targets.iter())
        .map(|target| async move {
            let result = ssh::run_on(session, target, &log).await;
            log.say(&target.name, &result.line());
            result
        })
        .buffer_unordered(args.parallel)
        .collect()
        .await;
    // The report in the order of the group's targets, whatever order they finished in.
    let order: std::collections::HashMap<&str, usize> = targets
        .iter()
        .enumerate()
        .map(|(i, t)| (t.name.as_str(), i))
        .collect();
    results.sort_by_key(|r| order.get(r.name.as_str()).copied().unwrap_or(usize::MAX));
    finish(args, &results)
}

/// `--node-ready`, `--drain`, `--delete-nodes`: each target's Node, through the API server.
fn through_api(args: &Args) -> ExitCode {
    let targets = match read_targets(args) {
        Ok(targets) => targets,
        Err(error) => return refuse(args, &error),
    };
    let api = match nodes::Api::in_cluster() {
        Ok(api) => api,
        Err(why) => return refuse(args, &Error::Api(why)),
    };
    let namespace = nodes::pod_namespace().unwrap_or_default();
    let owner = format!(
        "{namespace}/{}",
        std::env::var("WORKFLOW_GROUP").unwrap_or_default()
    );
    if args.drain {
        let options = drain::DrainOptions {
            timeout: Duration::from_secs(args.drain_timeout),
            grace_period: args.drain_grace_period,
            delete_empty_dir_data: args.drain_delete_emptydir_data,
            force: args.drain_force,
            owner,
            // The pod name is the host name: this step's own pod is never evicted.
            own_pod: std::env::var("HOSTNAME")
                .ok()
                .map(|pod| format!("{namespace}/{pod}")),
        };
        return finish(args, &drain::drain(&api, &targets, &options));
    }
    if args.uncordon {
        return finish(args, &drain::uncordon(&api, &targets, &owner));
    }
    if args.delete_nodes {
        return finish(args, &drain::delete_nodes(&api, &targets));
    }
    let timeout = Duration::from_secs(args.node_ready_timeout);
    let remove = args.remove_taint.as_deref().filter(|k| !k.is_empty());
    finish(args, &nodes::check(&api, &targets, timeout, remove))
}

/// Reports `results` (stdout and the termination message); 0 when every target is ok.
fn finish(args: &Args, results: &[TargetResult]) -> ExitCode {
    let message = report::message(results);
    print!("{message}");
    write_termination_log(args, &message);
    let counts = Counts::of(results);
    if counts.ok == counts.total() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// Says why the runner could not run, where the step's status will show it.
fn refuse(args: &Args, error: &Error) -> ExitCode {
    let message = format!("workflow-runner: {error}\n");
    eprint!("{message}");
    write_termination_log(args, &message);
    ExitCode::from(2)
}

fn write_termination_log(args: &Args, message: &str) {
    if args.termination_log.is_empty() {
        return;
    }
    // Outside a container there is no termination log: the report is on stdout already.
    if let Err(error) = std::fs::write(&args.termination_log, message)
        && args.termination_log != "/dev/termination-log"
    {
        eprintln!(
            "workflow-runner: write the report to {}: {error}",
            args.termination_log
        );
    }
}
