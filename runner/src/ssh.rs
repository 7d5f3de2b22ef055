//! One target: connect, check its host key, log in with the key, run the command, collect.
//!
//! Every stage is bounded: the connection, the host key check and the login together by the
//! connect timeout (a stalled handshake or a flood of banner lines ends there), the command by
//! the command timeout, and the output kept in memory by [`Tail`] whatever the target sends.
//!
//! Through a jump host ([`JumpHost`]) the same holds: the run's one session with the jump host
//! is bounded by the connect timeout, then each target's channel through it and the handshake
//! inside that channel by the connect timeout again; the run's parallelism bounds how many
//! channels are open at once.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use russh::client::{self, AuthResult, Handle};
use russh::keys::{Certificate, HashAlg, PrivateKey, PrivateKeyWithHashAlg};
use russh::{ChannelMsg, Disconnect};
use workflow_model::Target;
use workflow_model::text::shell_quote;

use crate::known_hosts::{HostKeyError, KnownHosts};
use crate::output::{Lines, Log, Tail};
use crate::report::{Outcome, TargetResult};

/// How the runner decides whether a target's host key is the target's.
#[derive(Debug, Clone)]
pub enum HostKeyPolicy {
    /// The key must be listed for the target's address (or name) in this `known_hosts` file,
    /// or be in a certificate signed by an authority it trusts for the target, and never be
    /// on a `@revoked` line.
    KnownHosts(Arc<KnownHosts>),
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
    /// The jump host's name has no address.
    #[error("resolve {host}: {source}")]
    Resolve {
        host: String,
        #[source]
        source: std::io::Error,
    },
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
    /// The target did not accept the key (or its certificate).
    #[error("authentication refused: {address} did not accept the {what} for user {user:?}")]
    LoginRefused {
        address: SocketAddr,
        user: String,
        what: &'static str,
    },
    /// No session with the jump host, so none with any target behind it.
    #[error("jump host {host}: {source}")]
    Jump {
        host: String,
        #[source]
        source: Arc<SshError>,
    },
    /// The jump host could not open a connection to the target.
    #[error(
        "jump host {host} could not reach {address}: {}",
        forward_failure(source)
    )]
    Forward {
        host: String,
        address: SocketAddr,
        #[source]
        source: Box<russh::Error>,
    },
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

/// What every target's session shares.
#[derive(Debug, Clone)]
pub struct Session {
    pub user: String,
    pub port: u16,
    pub key: Arc<PrivateKey>,
    /// The user certificate for `key` (the Secret's `ssh-certificate`): logins present it.
    pub certificate: Option<Arc<Certificate>>,
    pub host_keys: HostKeyPolicy,
    pub connect_timeout: Duration,
    pub command_timeout: Duration,
    /// The command, run by `/bin/sh -c` on the target.
    pub command: String,
    /// Sent as the command's standard input, then end of file (nothing when empty).
    pub stdin: Arc<Vec<u8>>,
    /// Files copied to the target before the command runs.
    pub copies: Arc<Vec<Copy>>,
    /// The host every target is reached through, when there is one.
    pub jump: Option<Arc<Jump>>,
}

/// A host the runner reaches the targets through (`ssh.jumpHost`): it logs in there with the
/// same key, checks its host key against the same `known_hosts`, and asks it to connect to each
/// target (`direct-tcpip`), speaking SSH with the target inside that channel. No program runs
/// on the jump host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JumpHost {
    /// An IP address or a host name (resolved in the step pod).
    pub address: String,
    pub port: u16,
    pub user: String,
}

/// The run's one connection to its [`JumpHost`], opened by the first target that needs it
/// (within the connect timeout) and shared by all: a jump host that cannot be reached is
/// tried once, and every target reports why.
pub struct Jump {
    host: JumpHost,
    connection: tokio::sync::OnceCell<Result<Handle<HostKeyCheck>, Arc<SshError>>>,
}

impl std::fmt::Debug for Jump {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Jump")
            .field("host", &self.host)
            .finish_non_exhaustive()
    }
}

impl Jump {
    /// A jump through `host`, not connected yet.
    pub fn new(host: JumpHost) -> Self {
        Self {
            host,
            connection: tokio::sync::OnceCell::new(),
        }
    }

    fn label(&self) -> String {
        format!("{}:{}", self.host.address, self.host.port)
    }

    /// The session with the jump host, connecting the first time.
    async fn session(&self, session: &Session) -> Result<&Handle<HostKeyCheck>, SshError> {
        let connected = self
            .connection
            .get_or_init(|| async { self.connect(session).await.map_err(Arc::new) })
            .await;
        connected.as_ref().map_err(|source| SshError::Jump {
            host: self.label(),
            source: Arc::clone(source),
        })
    }

    /// A logged-in session with the jump host within the connect timeout.
    async fn connect(&self, session: &Session) -> Result<Handle<HostKeyCheck>, SshError> {
        let host = &self.host;
        // A resolver that does not answer is bounded as a connection is.
        let lookup = tokio::net::lookup_host((host.address.as_str(), host.port));
        let address = tokio::time::timeout(session.connect_timeout, lookup)
            .await
            .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into()))
            .and_then(|mut found| {
                found
                    .next()
                    .ok_or_else(|| std::io::Error::other("no address"))
            })
            .map_err(|source| SshError::Resolve {
                host: host.address.clone(),
                source,
            })?;
        let peer = Peer {
            address,
            names: vec![host.address.clone()],
            user: host.user.clone(),
        };
        within(session.connect_timeout, address, direct(session, &peer)).await
    }
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

/// Who the runner is talking to: where, what `known_hosts` may list it as, whom to log in as.
struct Peer {
    address: SocketAddr,
    /// Its address, then its name.
    names: Vec<String>,
    user: String,
}

/// A session with `target` within the connect timeout (directly, or through the jump host:
/// the channel and the handshake inside it within the timeout, after the jump host's own
/// session), or why there is none.
async fn open(session: &Session, target: &Target) -> Result<Handle<HostKeyCheck>, SshError> {
    let ip = target
        .ip
        .trim()
        .parse::<IpAddr>()
        .map_err(|_| SshError::NotAnIp(target.ip.clone()))?;
    let peer = Peer {
        address: SocketAddr::new(ip, session.port),
        names: vec![target.ip.trim().to_owned(), target.name.clone()],
        user: session.user.clone(),
    };
    match &session.jump {
        None => {
            within(
                session.connect_timeout,
                peer.address,
                direct(session, &peer),
            )
            .await
        }
        Some(jump) => {
            let through = jump.session(session).await?;
            let forwarded = forward(session, &peer, through, jump.label());
            within(session.connect_timeout, peer.address, forwarded).await
        }
    }
}

/// `connecting`, or a timeout naming `address` after `timeout`.
async fn within(
    timeout: Duration,
    address: SocketAddr,
    connecting: impl Future<Output = Result<Handle<HostKeyCheck>, SshError>>,
) -> Result<Handle<HostKeyCheck>, SshError> {
    tokio::time::timeout(timeout, connecting)
        .await
        .unwrap_or_else(|_| Err(SshError::Timeout { address, timeout }))
}

/// A session with `peer` over TCP.
async fn direct(session: &Session, peer: &Peer) -> Result<Handle<HostKeyCheck>, SshError> {
    let address = peer.address;
    let stream = tokio::net::TcpStream::connect(address)
        .await
        .map_err(|io| SshError::Connection {
            address,
            source: russh::Error::IO(io),
        })?;
    let _ = stream.set_nodelay(true);
    handshake(session, peer, stream).await
}

/// A session with `peer` inside a channel the jump host opened to it.
async fn forward(
    session: &Session,
    peer: &Peer,
    through: &Handle<HostKeyCheck>,
    host: String,
) -> Result<Handle<HostKeyCheck>, SshError> {
    let channel = through
        .channel_open_direct_tcpip(
            peer.address.ip().to_string(),
            u32::from(peer.address.port()),
            "127.0.0.1",
            0,
        )
        .await
        .map_err(|source| SshError::Forward {
            host,
            address: peer.address,
            source: Box::new(source),
        })?;
    handshake(session, peer, channel.into_stream()).await
}

/// A host-verified, logged-in session with `peer` over `stream`, or why there is none.
async fn handshake<S>(
    session: &Session,
    peer: &Peer,
    stream: S,
) -> Result<Handle<HostKeyCheck>, SshError>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let address = peer.address;
    let rejected = Arc::new(Mutex::new(None));
    let check = HostKeyCheck {
        policy: session.host_keys.clone(),
        names: peer.names.clone(),
        port: address.port(),
        rejected: Arc::clone(&rejected),
    };
    let config = client_config(check.wants_certificate());
    let mut handle = match client::connect_stream(config, stream, check).await {
        Ok(handle) => handle,
        Err(source) => {
            let refused = rejected.lock().ok().and_then(|mut r| r.take());
            return Err(refused.map_or(SshError::Connection { address, source }, SshError::HostKey));
        }
    };
    let outcome = match &session.certificate {
        Some(certificate) => {
            handle
                .authenticate_openssh_cert(
                    peer.user.clone(),
                    Arc::clone(&session.key),
                    Certificate::clone(certificate),
                )
                .await
        }
        None => {
            let hash = rsa_hash(&mut handle, session, address).await?;
            let key = PrivateKeyWithHashAlg::new(Arc::clone(&session.key), hash);
            handle.authenticate_publickey(peer.user.clone(), key).await
        }
    };
    match outcome {
        Ok(AuthResult::Success) => Ok(handle),
        Ok(AuthResult::Failure { .. }) => Err(SshError::LoginRefused {
            address,
            user: peer.user.clone(),
            what: if session.certificate.is_some() {
                "certificate"
            } else {
                "key"
            },
        }),
        Err(source) => Err(SshError::Connection { address, source }),
    }
}

/// The signature hash an RSA key signs with: only an RSA key needs to know which the server
/// takes, and asking waits up to a second for the server's extension list.
async fn rsa_hash(
    handle: &mut Handle<HostKeyCheck>,
    session: &Session,
    address: SocketAddr,
) -> Result<Option<HashAlg>, SshError> {
    if !session.key.algorithm().is_rsa() {
        return Ok(None);
    }
    handle
        .best_supported_rsa_hash()
        .await
        .map(Option::flatten)
        .map_err(|source| SshError::Connection { address, source })
}

/// The client's settings; `certificates`: also ask for a host certificate (an authority in
/// `known_hosts` may vouch for the host).
fn client_config(certificates: bool) -> Arc<client::Config> {
    let mut preferred = russh::Preferred::default();
    if certificates {
        preferred.host_key_certificates = preferred.key.clone();
    }
    Arc::new(client::Config {
        // A target that goes silent mid-command is caught by the command timeout; this only
        // lets a dead connection go sooner than that.
        keepalive_interval: Some(Duration::from_secs(15)),
        keepalive_max: 3,
        nodelay: true,
        // What one target may have in flight: a flood of output waits for the runner instead
        // of piling up in memory (16 messages of at most 32 KiB).
        window_size: 512 * 1024,
        channel_buffer_size: 16,
        preferred,
        ..client::Config::default()
    })
}

/// Why the jump host could not open a channel to a target, as its reader needs it.
fn forward_failure(error: &russh::Error) -> String {
    match error {
        russh::Error::ChannelOpenFailure(reason) => format!("the channel was refused ({reason:?})"),
        russh::Error::Disconnect => "the jump host closed the connection".into(),
        other => other.to_string(),
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

pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The client side's host key decision (russh asks it once per connection).
struct HostKeyCheck {
    policy: HostKeyPolicy,
    /// What the host may be listed as in `known_hosts`: its address, then its name.
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
        let known = match &self.policy {
            HostKeyPolicy::AcceptAny => return Ok(true),
            HostKeyPolicy::KnownHosts(known) => known,
        };
        let verdict = match key {
            russh::keys::PublicKeyOrCertificate::PublicKey { key, .. } => {
                known.judge_key(&self.names, self.port, key)
            }
            russh::keys::PublicKeyOrCertificate::Certificate(certificate) => {
                known.judge_certificate(&self.names, self.port, certificate, unix_now())
            }
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
    /// Whether to ask the host for a certificate: only when an authority may vouch for it.
    fn wants_certificate(&self) -> bool {
        match &self.policy {
            HostKeyPolicy::KnownHosts(known) => known.has_authority_for(&self.names, self.port),
            HostKeyPolicy::AcceptAny => false,
        }
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
