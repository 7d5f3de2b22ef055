//! One target: connect, check its host key, log in with the key, run the command, collect.
//!
//! Every stage is bounded: the connection, the host key check and the login together by the
//! connect timeout (a stalled handshake or a flood of banner lines ends there), the command by
//! the command timeout, and the output kept in memory by [`Tail`] whatever the target sends.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use russh::client::{self, AuthResult, Handle};
use russh::keys::{HashAlg, PrivateKey, PrivateKeyWithHashAlg, PublicKey};
use russh::{ChannelMsg, Disconnect};
use workflow_model::Target;
use workflow_model::text::shell_quote;

use crate::output::{Lines, Log, Tail};
use crate::report::{Outcome, TargetResult};

/// How the runner decides whether a target's host key is the target's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostKeyPolicy {
    /// The key must be listed for the target's address (or name) in this `known_hosts` file.
    KnownHosts(PathBuf),
    /// Any key is accepted: the connection is encrypted but not authenticated. Only when the
    /// group asks for it by name.
    AcceptAny,
}

/// Why the command could not run on a target: the target is reported unreachable.
#[derive(Debug, thiserror::Error)]
enum SshError {
    /// The target's address is not an IP address.
    #[error("{0:?} is not an IP address")]
    NotAnIp(String),
    /// Connect, handshake and login together took longer than the connect timeout.
    #[error(
        "no SSH session with {address} within {} s (connect, handshake and login)",
        timeout.as_secs()
    )]
    Timeout {
        address: SocketAddr,
        timeout: Duration,
    },
    /// The target's host key is not trusted.
    #[error(transparent)]
    HostKey(#[from] HostKeyError),
    /// The connection or the SSH protocol failed.
    #[error("{}", describe(address, source))]
    Connection {
        address: SocketAddr,
        #[source]
        source: russh::Error,
    },
    /// The target did not accept the key.
    #[error("authentication refused: {address} did not accept the key for user {user:?}")]
    LoginRefused { address: SocketAddr, user: String },
    /// A step on the open session failed, such as opening a channel or sending input.
    #[error("{step}: {source}")]
    Channel {
        step: &'static str,
        #[source]
        source: russh::Error,
    },
    /// The command's session ended without an exit status.
    #[error("the session ended without an exit status")]
    NoExitStatus,
    /// A file to copy cannot be opened in the step pod.
    #[error("open {}: {source}", path.display())]
    OpenCopy {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A copy's session ended without an exit status.
    #[error("the copy to {to} ended without an exit status")]
    CopyNoExitStatus { to: String },
}

/// Why a target's host key is refused.
#[derive(Debug, thiserror::Error)]
enum HostKeyError {
    /// The target offered a certificate, which the runner does not check.
    #[error("the target offered a host certificate; list its host key in known_hosts")]
    Certificate,
    /// `known_hosts` lists another key for the target.
    #[error(
        "host key mismatch: {name} offered {algorithm} {fingerprint}, but line {line} of {} \
         lists another key for it",
        path.display()
    )]
    Mismatch {
        name: String,
        algorithm: String,
        fingerprint: String,
        line: usize,
        path: PathBuf,
    },
    /// `known_hosts` cannot be read.
    #[error("read {}: {source}", path.display())]
    KnownHosts {
        path: PathBuf,
        #[source]
        source: russh::keys::Error,
    },
    /// `known_hosts` lists no key for the target.
    #[error(
        "host key not trusted: {algorithm} {fingerprint} of {} is not in {}",
        names.join(" / "),
        path.display()
    )]
    NotTrusted {
        algorithm: String,
        fingerprint: String,
        names: Vec<String>,
        path: PathBuf,
    },
}

/// What every target's session shares.
#[derive(Debug, Clone)]
pub struct Session {
    pub user: String,
    pub port: u16,
    pub key: Arc<PrivateKey>,
    pub host_keys: HostKeyPolicy,
    pub connect_timeout: Duration,
    pub command_timeout: Duration,
    /// The command, run by `/bin/sh -c` on the target.
    pub command: String,
    /// Sent as the command's standard input, then end of file (nothing when empty).
    pub stdin: Arc<Vec<u8>>,
    /// Files copied to the target before the command runs.
    pub copies: Arc<Vec<Copy>>,
}

/// A file of the step pod delivered to each target: streamed over the session (never whole in
/// memory), written beside its destination, checked against its SHA-256 there, then renamed
/// into place; a destination that already has that content is left alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Copy {
    pub from: PathBuf,
    pub to: String,
    /// Octal, e.g. `0755`.
    pub mode: String,
    /// The source's SHA-256, hex.
    pub sha256: String,
    pub size: u64,
}

/// Runs the session's command on `target`; never fails: every error is the target's outcome.
pub async fn run_on(session: &Session, target: &Target, log: &Log) -> TargetResult {
    let start = Instant::now();
    let mut tail = Tail::default();
    let outcome = match open(session, target).await {
        Ok(handle) => {
            let mut lines = log.lines(&target.name);
            let outcome = match tokio::time::timeout(
                session.command_timeout,
                execute(&handle, session, target, &mut tail, &mut lines),
            )
            .await
            {
                Ok(Ok(outcome)) => outcome,
                Ok(Err(why)) => Outcome::Unreachable(why.to_string()),
                Err(_) => Outcome::TimedOut(session.command_timeout),
            };
            lines.finish();
            // Closing the session ends the remote command too (sshd hangs up on it).
            let _ = handle.disconnect(Disconnect::ByApplication, "", "en").await;
            outcome
        }
        Err(why) => Outcome::Unreachable(why.to_string()),
    };
    TargetResult {
        name: target.name.clone(),
        outcome,
        duration: start.elapsed(),
        tail: tail.text(),
    }
}

/// A session with `target` within the connect timeout, or why there is none.
async fn open(session: &Session, target: &Target) -> Result<Handle<HostKeyCheck>, SshError> {
    let ip = target
        .ip
        .trim()
        .parse::<IpAddr>()
        .map_err(|_| SshError::NotAnIp(target.ip.clone()))?;
    let address = SocketAddr::new(ip, session.port);
    tokio::time::timeout(session.connect_timeout, connect(session, target, address))
        .await
        .unwrap_or_else(|_| {
            Err(SshError::Timeout {
                address,
                timeout: session.connect_timeout,
            })
        })
}

/// A connected, host-verified, logged-in session, or why there is none.
async fn connect(
    session: &Session,
    target: &Target,
    address: SocketAddr,
) -> Result<Handle<HostKeyCheck>, SshError> {
    let config = Arc::new(client::Config {
        // A target that goes silent mid-command is caught by the command timeout; this only
        // lets a dead connection go sooner than that.
        keepalive_interval: Some(Duration::from_secs(15)),
        keepalive_max: 3,
        nodelay: true,
        // What one target may have in flight: a flood of output waits for the runner instead
        // of piling up in memory (16 messages of at most 32 KiB).
        window_size: 512 * 1024,
        channel_buffer_size: 16,
        ..client::Config::default()
    });
    let rejected = Arc::new(Mutex::new(None));
    let check = HostKeyCheck {
        policy: session.host_keys.clone(),
        names: vec![target.ip.trim().to_owned(), target.name.clone()],
        port: session.port,
        rejected: Arc::clone(&rejected),
    };
    let mut handle = match client::connect(config, address, check).await {
        Ok(handle) => handle,
        Err(source) => {
            let refused = rejected.lock().ok().and_then(|mut r| r.take());
            return Err(refused.map_or(SshError::Connection { address, source }, SshError::HostKey));
        }
    };
    // Only an RSA key needs to know which signature hash the server takes, and asking waits
    // up to a second for the server's extension list.
    let hash = if session.key.algorithm().is_rsa() {
        handle
            .best_supported_rsa_hash()
            .await
            .map_err(|source| SshError::Connection { address, source })?
            .flatten()
    } else {
        None
    };
    let key = PrivateKeyWithHashAlg::new(Arc::clone(&session.key), hash);
    match handle
        .authenticate_publickey(session.user.clone(), key)
        .await
    {
        Ok(AuthResult::Success) => Ok(handle),
        Ok(AuthResult::Failure { .. }) => Err(SshError::LoginRefused {
            address,
            user: session.user.clone(),
        }),
        Err(source) => Err(SshError::Connection { address, source }),
    }
}

/// What an SSH error means to a reader of the step's status.
fn describe(address: &SocketAddr, error: &russh::Error) -> String {
    match error {
        russh::Error::IO(io) => format!("connect {address}: {io}"),
        russh::Error::Disconnect => format!("{address} closed the connection"),
        russh::Error::Version => format!("{address} does not speak SSH (no version line)"),
        other => format!("SSH with {address}: {other}"),
    }
}

/// Runs the command on an open session; the output goes to `tail` and to the step's log.
async fn execute(
    handle: &Handle<HostKeyCheck>,
    session: &Session,
    target: &Target,
    tail: &mut Tail,
    lines: &mut Lines<'_>,
) -> Result<Outcome, SshError> {
    for copy in session.copies.iter() {
        if let Some(failed) = deliver(handle, copy, lines).await? {
            return Ok(failed);
        }
    }
    let mut channel = handle
        .channel_open_session()
        .await
        .map_err(failed("open a session channel"))?;
    channel
        .exec(true, remote_command(&session.command, target, unix_now()))
        .await
        .map_err(failed("start the command"))?;
    // The command's input, then its end, so that a command that reads it does not wait.
    if !session.stdin.is_empty() {
        channel
            .data(&session.stdin[..])
            .await
            .map_err(failed("send the command's input"))?;
    }
    channel
        .eof()
        .await
        .map_err(failed("send the command's input"))?;
    let mut exit = None;
    while let Some(message) = channel.wait().await {
        match message {
            ChannelMsg::Data { data } | ChannelMsg::ExtendedData { data, .. } => {
                tail.push(&data);
                lines.push(&data);
            }
            ChannelMsg::ExitStatus { exit_status } => {
                exit = Some(Outcome::from_status(exit_status))
            }
            ChannelMsg::ExitSignal { signal_name, .. } => {
                exit = Some(Outcome::Killed(format!("{signal_name:?}")));
            }
            _ => {}
        }
    }
    exit.ok_or(SshError::NoExitStatus)
}

/// An error of `step` on the open session.
fn failed(step: &'static str) -> impl Fn(russh::Error) -> SshError {
    move |source| SshError::Channel { step, source }
}

/// The target's side of a [`Copy`]: writes a temporary file beside the destination from
/// standard input, checks its SHA-256, sets its mode and renames it into place. Prints one
/// line; exits 1 naming what went wrong.
pub fn copy_command(copy: &Copy) -> String {
    let (to, sum, mode) = (
        shell_quote(&copy.to),
        shell_quote(&copy.sha256),
        shell_quote(&copy.mode),
    );
    format!(
        "to={to}; sum={sum}; t=\"$to.partial.$$\"; \
         mkdir -p \"$(dirname \"$to\")\" && (umask 077; cat > \"$t\") \
         || {{ rm -f \"$t\"; echo \"could not write $t\"; exit 1; }}; \
         got=\"$(sha256sum < \"$t\" | cut -d' ' -f1)\"; \
         if [ \"$got\" != \"$sum\" ]; then rm -f \"$t\"; echo \"$to arrived with SHA-256 $got, not $sum\"; exit 1; fi; \
         chmod {mode} \"$t\" && mv -f \"$t\" \"$to\" && echo \"$to written ({size} bytes)\"",
        size = copy.size
    )
}

/// Delivers `copy` over `handle` unless the destination has its content already; `Some(outcome)`
/// when it failed on the target.
async fn deliver(
    handle: &Handle<HostKeyCheck>,
    copy: &Copy,
    lines: &mut Lines<'_>,
) -> Result<Option<Outcome>, SshError> {
    let to = shell_quote(&copy.to);
    let check = format!(
        "[ -f {to} ] && [ \"$(sha256sum < {to} | cut -d' ' -f1)\" = {} ] && chmod {} {to}",
        shell_quote(&copy.sha256),
        shell_quote(&copy.mode)
    );
    if exec_collect(handle, &check, None).await?.0 == Some(0) {
        lines.push(format!("{} unchanged\n", copy.to).as_bytes());
        return Ok(None);
    }
    let file = tokio::fs::File::open(&copy.from)
        .await
        .map_err(|source| SshError::OpenCopy {
            path: copy.from.clone(),
            source,
        })?;
    let (exit, said) = exec_collect(handle, &copy_command(copy), Some(file)).await?;
    lines.push(said.as_bytes());
    match exit {
        Some(0) => Ok(None),
        Some(code) => Ok(Some(Outcome::CheckFailed(format!(
            "copy to {} failed (exit code {code}): {}",
            copy.to,
            said.trim()
        )))),
        None => Err(SshError::CopyNoExitStatus {
            to: copy.to.clone(),
        }),
    }
}

/// Runs `command` on a channel of its own with `input` (then end of file) as its standard
/// input; its exit status and the tail of what it printed. A command that ends before it read
/// all its input (it failed) ends this too: what was not sent is not waited for.
async fn exec_collect(
    handle: &Handle<HostKeyCheck>,
    command: &str,
    input: Option<tokio::fs::File>,
) -> Result<(Option<u32>, String), SshError> {
    let channel = handle
        .channel_open_session()
        .await
        .map_err(failed("open a session channel"))?;
    channel
        .exec(true, command)
        .await
        .map_err(failed("start a command"))?;
    let (mut reader, writer) = channel.split();
    let send = async {
        if let Some(file) = input {
            writer.data(file).await.map_err(failed("send a file"))?;
        }
        writer.eof().await.map_err(failed("send a file"))
    };
    let receive = async {
        let mut said = Tail::default();
        let mut exit = None;
        while let Some(message) = reader.wait().await {
            match message {
                ChannelMsg::Data { data } | ChannelMsg::ExtendedData { data, .. } => {
                    said.push(&data)
                }
                ChannelMsg::ExitStatus { exit_status } => exit = Some(exit_status),
                _ => {}
            }
        }
        (exit, said.text())
    };
    tokio::pin!(send, receive);
    let sent = tokio::select! {
        done = &mut receive => return Ok(done),
        sent = &mut send => sent,
    };
    let (exit, said) = receive.await;
    match (exit, sent) {
        (None, Err(why)) => Err(why),
        (exit, _) => Ok((exit, said)),
    }
}

impl Outcome {
    fn from_status(status: u32) -> Self {
        if status == 0 {
            Outcome::Succeeded
        } else {
            Outcome::Exited(status)
        }
    }
}

/// The command line sent to the target: the step's command for `/bin/sh -c`, with the
/// target's own name, address and role in its environment, and the runner's clock
/// (`WORKFLOW_RUNNER_TIME`, seconds since the Unix epoch, for a check of the target's clock).
/// An SSH `env` request would need the server's `AcceptEnv`.
pub fn remote_command(command: &str, target: &Target, now: u64) -> String {
    format!(
        "WORKFLOW_TARGET_NAME={} WORKFLOW_TARGET_IP={} WORKFLOW_TARGET_ROLE={} \
         WORKFLOW_RUNNER_TIME={now} exec /bin/sh -c {}",
        shell_quote(&target.name),
        shell_quote(&target.ip),
        shell_quote(&target.role),
        shell_quote(command)
    )
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The client side's host key decision (russh asks it once per connection).
struct HostKeyCheck {
    policy: HostKeyPolicy,
    /// What the target may be listed as in `known_hosts`: its address, then its name.
    names: Vec<String>,
    port: u16,
    /// Why a key was refused, for the report (russh's own error only says "unknown key").
    rejected: Arc<Mutex<Option<HostKeyError>>>,
}

impl client::Handler for HostKeyCheck {
    type Error = russh::Error;

    async fn check_server_key(
        &mut self,
        key: &russh::keys::PublicKeyOrCertificate,
    ) -> Result<bool, Self::Error> {
        let verdict = match key {
            russh::keys::PublicKeyOrCertificate::PublicKey { key, .. } => self.judge(key),
            russh::keys::PublicKeyOrCertificate::Certificate(_) => Err(HostKeyError::Certificate),
        };
        match verdict {
            Ok(()) => Ok(true),
            Err(why) => {
                if let Ok(mut rejected) = self.rejected.lock() {
                    *rejected = Some(why);
                }
                Ok(false)
            }
        }
    }
}

impl HostKeyCheck {
    fn judge(&self, key: &PublicKey) -> Result<(), HostKeyError> {
        let path = match &self.policy {
            HostKeyPolicy::AcceptAny => return Ok(()),
            HostKeyPolicy::KnownHosts(path) => path,
        };
        let fingerprint = key.fingerprint(HashAlg::Sha256);
        for name in &self.names {
            match russh::keys::check_known_hosts_path(name, self.port, key, path) {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                Err(russh::keys::Error::KeyChanged { line }) => {
                    return Err(HostKeyError::Mismatch {
                        name: name.clone(),
                        algorithm: key.algorithm().to_string(),
                        fingerprint: fingerprint.to_string(),
                        line,
                        path: path.clone(),
                    });
                }
                Err(source) => {
                    return Err(HostKeyError::KnownHosts {
                        path: path.clone(),
                        source,
                    });
                }
            }
        }
        Err(HostKeyError::NotTrusted {
            algorithm: key.algorithm().to_string(),
            fingerprint: fingerprint.to_string(),
            names: self.names.clone(),
            path: path.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_remote_command_quotes_the_step_and_the_targets_facts() {
        let target = Target {
            name: "node-1".into(),
            ip: "10.0.0.1".into(),
            role: "Master".into(),
        };
        assert_eq!(
            remote_command("echo 'it''s' $HOME", &target, 1_700_000_000),
            r"WORKFLOW_TARGET_NAME='node-1' WORKFLOW_TARGET_IP='10.0.0.1' WORKFLOW_TARGET_ROLE='Master' WORKFLOW_RUNNER_TIME=1700000000 exec /bin/sh -c 'echo '\''it'\'''\''s'\'' $HOME'"
        );
    }
}
