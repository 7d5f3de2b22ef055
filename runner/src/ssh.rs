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
                Ok(Err(why)) => Outcome::Unreachable(why),
                Err(_) => Outcome::TimedOut(session.command_timeout),
            };
            lines.finish();
            // Closing the session ends the remote command too (sshd hangs up on it).
            let _ = handle.disconnect(Disconnect::ByApplication, "", "en").await;
            outcome
        }
        Err(why) => Outcome::Unreachable(why),
    };
    TargetResult {
        name: target.name.clone(),
        outcome,
        duration: start.elapsed(),
        tail: tail.text(),
    }
}

/// A session with `target` within the connect timeout, or why there is none.
async fn open(session: &Session, target: &Target) -> Result<Handle<HostKeyCheck>, String> {
    let ip = target
        .ip
        .trim()
        .parse::<IpAddr>()
        .map_err(|_| format!("{:?} is not an IP address", target.ip))?;
    let address = SocketAddr::new(ip, session.port);
    tokio::time::timeout(session.connect_timeout, connect(session, target, address))
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "no SSH session with {address} within {} s (connect, handshake and login)",
                session.connect_timeout.as_secs()
            ))
        })
}

/// A connected, host-verified, logged-in session, or why there is none.
async fn connect(
    session: &Session,
    target: &Target,
    address: SocketAddr,
) -> Result<Handle<HostKeyCheck>, String> {
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
        Err(error) => {
            let why = rejected.lock().ok().and_then(|mut r| r.take());
            return Err(why.unwrap_or_else(|| describe(address, &error)));
        }
    };
    // Only an RSA key needs to know which signature hash the server takes, and asking waits
    // up to a second for the server's extension list.
    let hash = if session.key.algorithm().is_rsa() {
        handle
            .best_supported_rsa_hash()
            .await
            .map_err(|e| describe(address, &e))?
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
        Ok(AuthResult::Failure { .. }) => Err(format!(
            "authentication refused: {address} did not accept the key for user {:?}",
            session.user
        )),
        Err(error) => Err(describe(address, &error)),
    }
}

/// What an SSH error means to a reader of the step's status.
fn describe(address: SocketAddr, error: &russh::Error) -> String {
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
) -> Result<Outcome, String> {
    for copy in session.copies.iter() {
        if let Some(failed) = deliver(handle, copy, lines).await? {
            return Ok(failed);
        }
    }
    let mut channel = handle
        .channel_open_session()
        .await
        .map_err(|e| format!("open a session channel: {e}"))?;
    channel
        .exec(true, remote_command(&session.command, target, unix_now()))
        .await
        .map_err(|e| format!("start the command: {e}"))?;
    // The command's input, then its end, so that a command that reads it does not wait.
    if !session.stdin.is_empty() {
        channel
            .data(&session.stdin[..])
            .await
            .map_err(|e| format!("send the command's input: {e}"))?;
    }
    channel
        .eof()
        .await
        .map_err(|e| format!("send the command's input: {e}"))?;
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
    exit.ok_or_else(|| "the session ended without an exit status".to_owned())
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
) -> Result<Option<Outcome>, String> {
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
        .map_err(|e| format!("open {}: {e}", copy.from.display()))?;
    let (exit, said) = exec_collect(handle, &copy_command(copy), Some(file)).await?;
    lines.push(said.as_bytes());
    match exit {
        Some(0) => Ok(None),
        Some(code) => Ok(Some(Outcome::CheckFailed(format!(
            "copy to {} failed (exit code {code}): {}",
            copy.to,
            said.trim()
        )))),
        None => Err(format!(
            "the copy to {} ended without an exit status",
            copy.to
        )),
    }
}

/// Runs `command` on a channel of its own with `input` (then end of file) as its standard
/// input; its exit status and the tail of what it printed. A command that ends before it read
/// all its input (it failed) ends this too: what was not sent is not waited for.
async fn exec_collect(
    handle: &Handle<HostKeyCheck>,
    command: &str,
    input: Option<tokio::fs::File>,
) -> Result<(Option<u32>, String), String> {
    let channel = handle
        .channel_open_session()
        .await
        .map_err(|e| format!("open a session channel: {e}"))?;
    channel
        .exec(true, command)
        .await
        .map_err(|e| format!("start a command: {e}"))?;
    let (mut reader, writer) = channel.split();
    let send = async {
        if let Some(file) = input {
            writer
                .data(file)
                .await
                .map_err(|e| format!("send a file: {e}"))?;
        }
        writer.eof().await.map_err(|e| format!("send a file: {e}"))
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
    rejected: Arc<Mutex<Option<String>>>,
}

impl client::Handler for HostKeyCheck {
    type Error = russh::Error;

    async fn check_server_key(
        &mut self,
        key: &russh::keys::PublicKeyOrCertificate,
    ) -> Result<bool, Self::Error> {
        let verdict = match key {
            russh::keys::PublicKeyOrCertificate::PublicKey { key, .. } => self.judge(key),
            russh::keys::PublicKeyOrCertificate::Certificate(_) => Err(
                "the target offered a host certificate; list its host key in known_hosts".into(),
            ),
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
    fn judge(&self, key: &PublicKey) -> Result<(), String> {
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
                    return Err(format!(
                        "host key mismatch: {name} offered {} {fingerprint}, but line {line} of {} lists another key for it",
                        key.algorithm(),
                        path.display()
                    ));
                }
                Err(error) => return Err(format!("read {}: {error}", path.display())),
            }
        }
        Err(format!(
            "host key not trusted: {} {fingerprint} of {} is not in {}",
            key.algorithm(),
            self.names.join(" / "),
            path.display()
        ))
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
