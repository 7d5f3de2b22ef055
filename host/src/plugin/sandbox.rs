//! What a plugin instance sees of the host: WASI with nothing granted, fake clocks, captured
//! stdio and `host-log`, plus the per-call resource limiter.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, Result as WasmResult};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};
use wasmtime_wasi::{
    HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView,
};
use workflow_model::text::{Marker, truncate};

use super::bindings::v0_1::workflow::plugin::{host_log as v0_1_host_log, types as v0_1_types};
use super::bindings::v0_2::workflow::plugin::{host_log as v0_2_host_log, types as v0_2_types};
use super::bindings::workflow::plugin::{host_log, types as wit_types};

/// Most `host-log` lines kept per call; the rest is counted and dropped.
const MAX_LOG_LINES: usize = 200;

/// Most WASI resources (pollables, streams, ...) one call may hold at once: they live in the
/// host's memory, outside the call's memory cap.
const MAX_RESOURCES: usize = 10_000;

/// Who is talking, for the operator's logs.
#[derive(Debug, Clone)]
pub(crate) struct LogTag {
    /// The workflow type, or the origin before `info` is known.
    pub plugin: Arc<str>,
    /// Short content digest.
    pub digest: Arc<str>,
}

/// The state of one store: one call of one plugin.
pub(crate) struct CallState {
    /// Built on the plugin's first WASI call: a plugin built with the SDK makes none.
    wasi: Option<WasiCtx>,
    stdout: Capture,
    stderr: Capture,
    table: ResourceTable,
    pub limiter: CallLimiter,
    tag: LogTag,
    max_line_bytes: usize,
    log_lines: usize,
    dropped_log_lines: usize,
    /// The last line logged at error level: where a plugin built with the SDK writes its
    /// panic message (the SDK sends stderr to `host-log`).
    last_error: Option<String>,
}

impl CallState {
    /// The state of one call: stdout and stderr kept up to `capture_bytes` each. Its WASI
    /// context (see [`CallState::build_wasi`]) is built only if the plugin uses WASI.
    pub fn new(
        tag: LogTag,
        memory_limit: usize,
        max_line_bytes: usize,
        capture_bytes: usize,
    ) -> Self {
        let mut table = ResourceTable::new();
        table.set_max_capacity(MAX_RESOURCES);
        Self {
            wasi: None,
            stdout: Capture::new(capture_bytes),
            stderr: Capture::new(capture_bytes),
            table,
            limiter: CallLimiter {
                memory_limit,
                memory_exhausted: false,
            },
            tag,
            max_line_bytes,
            log_lines: 0,
            dropped_log_lines: 0,
            last_error: None,
        }
    }

    /// A context granting nothing: no preopens, environment, arguments or network; clocks
    /// stopped at the epoch (the time reaches plugins only through `context.now`);
    /// deterministic randomness; stdout and stderr into the call's bounded captures.
    fn build_wasi(stdout: &Capture, stderr: &Capture) -> WasiCtx {
        WasiCtxBuilder::new()
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .wall_clock(StoppedClock)
            .monotonic_clock(StoppedClock)
            .secure_random(wasmtime_wasi::Deterministic::new(vec![4, 2]))
            .insecure_random(wasmtime_wasi::Deterministic::new(vec![4, 2]))
            .insecure_random_seed(42)
            .max_random_size(4096)
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .build()
    }

    /// The plugin's last words, at most `max_bytes` long: the last line of its stderr, or
    /// else the last line it logged at error level (a Rust guest's panic message is one or
    /// the other).
    pub fn last_output(&self, max_bytes: usize) -> Option<String> {
        self.stderr.last_line(max_bytes).or_else(|| {
            self.last_error
                .as_deref()
                .map(|line| truncate(line, max_bytes, Marker::Length).into_owned())
        })
    }

    /// Logs what the plugin wrote to stdout and stderr, and how many `host-log` lines could
    /// not be kept.
    pub fn finish_logs(&self) {
        self.stdout
            .flush_to_log(&self.tag, "stdout", self.max_line_bytes);
        self.stderr
            .flush_to_log(&self.tag, "stderr", self.max_line_bytes);
        if self.dropped_log_lines > 0 {
            tracing::warn!(
                plugin = %self.tag.plugin,
                digest = %self.tag.digest,
                dropped = self.dropped_log_lines,
                "plugin logged more than {MAX_LOG_LINES} lines in one call; the rest was dropped"
            );
        }
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        let (stdout, stderr) = (&self.stdout, &self.stderr);
        WasiCtxView {
            ctx: self
                .wasi
                .get_or_insert_with(|| Self::build_wasi(stdout, stderr)),
            table: &mut self.table,
        }
    }
}

impl host_log::Host for CallState {
    fn log(&mut self, level: host_log::Level, message: String) {
        self.plugin_log(level, message);
    }
}

/// A plugin of contract 0.1.0 logs the same way.
impl v0_1_host_log::Host for CallState {
    fn log(&mut self, level: v0_1_host_log::Level, message: String) {
        let level = match level {
            v0_1_host_log::Level::Debug => host_log::Level::Debug,
            v0_1_host_log::Level::Info => host_log::Level::Info,
            v0_1_host_log::Level::Warn => host_log::Level::Warn,
            v0_1_host_log::Level::Error => host_log::Level::Error,
        };
        self.plugin_log(level, message);
    }
}

impl v0_1_types::Host for CallState {}

/// A plugin of contract 0.2.0 logs the same way.
impl v0_2_host_log::Host for CallState {
    fn log(&mut self, level: v0_2_host_log::Level, message: String) {
        let level = match level {
            v0_2_host_log::Level::Debug => host_log::Level::Debug,
            v0_2_host_log::Level::Info => host_log::Level::Info,
            v0_2_host_log::Level::Warn => host_log::Level::Warn,
            v0_2_host_log::Level::Error => host_log::Level::Error,
        };
        self.plugin_log(level, message);
    }
}

impl v0_2_types::Host for CallState {}

impl CallState {
    fn plugin_log(&mut self, level: host_log::Level, message: String) {
        let message = truncate(&message, self.max_line_bytes, Marker::Length);
        if matches!(level, host_log::Level::Error) {
            self.last_error = Some(message.clone().into_owned());
        }
        if self.log_lines >= MAX_LOG_LINES {
            self.dropped_log_lines += 1;
            return;
        }
        self.log_lines += 1;
        let (plugin, digest) = (&*self.tag.plugin, &*self.tag.digest);
        match level {
            host_log::Level::Debug => tracing::debug!(plugin, digest, "{message}"),
            host_log::Level::Info => tracing::info!(plugin, digest, "{message}"),
            host_log::Level::Warn => tracing::warn!(plugin, digest, "{message}"),
            host_log::Level::Error => tracing::error!(plugin, digest, "{message}"),
        }
    }
}

/// The `types` interface has no functions; its bindings still want a host.
impl wit_types::Host for CallState {}

/// Caps linear memory and remembers whether the cap was hit, so that the trap that usually
/// follows (a Rust guest aborts when allocation fails) is reported as memory exhaustion.
pub(crate) struct CallLimiter {
    memory_limit: usize,
    pub memory_exhausted: bool,
}

impl ResourceLimiter for CallLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> WasmResult<bool> {
        let allow = desired <= self.memory_limit && maximum.is_none_or(|max| desired <= max);
        if !allow {
            self.memory_exhausted = true;
        }
        Ok(allow)
    }

    fn memory_grow_failed(&mut self, _error: wasmtime::Error) -> WasmResult<()> {
        self.memory_exhausted = true;
        Ok(())
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> WasmResult<bool> {
        Ok(desired <= 100_000 && maximum.is_none_or(|max| desired <= max))
    }
}

/// The wall and monotonic clocks plugins see: stopped at zero.
struct StoppedClock;

impl HostWallClock for StoppedClock {
    fn resolution(&self) -> Duration {
        Duration::from_secs(1)
    }
    fn now(&self) -> Duration {
        Duration::ZERO
    }
}

impl HostMonotonicClock for StoppedClock {
    fn resolution(&self) -> u64 {
        1_000_000_000
    }
    fn now(&self) -> u64 {
        0
    }
}

/// A bounded capture of a plugin's stdout or stderr: writes always succeed (a chatty plugin
/// must not crash because of its logs), bytes beyond the capacity are counted and dropped.
#[derive(Clone)]
pub(crate) struct Capture(Arc<Mutex<CaptureBuf>>);

struct CaptureBuf {
    bytes: Vec<u8>,
    capacity: usize,
    dropped: usize,
}

impl Capture {
    pub fn new(capacity: usize) -> Self {
        Self(Arc::new(Mutex::new(CaptureBuf {
            bytes: Vec::new(),
            capacity,
            dropped: 0,
        })))
    }

    fn push(&self, data: &[u8]) {
        let mut buf = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let room = buf.capacity.saturating_sub(buf.bytes.len());
        let take = room.min(data.len());
        buf.bytes.extend_from_slice(&data[..take]);
        buf.dropped += data.len() - take;
    }

    /// Sends what was captured to the operator's logs, one event per line.
    pub fn flush_to_log(&self, tag: &LogTag, stream: &'static str, max_line_bytes: usize) {
        let buf = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if buf.bytes.is_empty() {
            return;
        }
        let text = String::from_utf8_lossy(&buf.bytes);
        let mut lines = text.lines().filter(|l| !l.trim().is_empty());
        // As many lines as `host-log` keeps: a megabyte of one-character lines must not
        // become half a million log events.
        for line in lines.by_ref().take(MAX_LOG_LINES) {
            let line = truncate(line, max_line_bytes, Marker::Length);
            tracing::info!(plugin = %tag.plugin, digest = %tag.digest, stream, "{line}");
        }
        let dropped_lines = lines.count();
        if dropped_lines > 0 {
            tracing::warn!(
                plugin = %tag.plugin,
                digest = %tag.digest,
                stream,
                dropped_lines,
                "plugin wrote more than {MAX_LOG_LINES} lines in one call; the rest was dropped"
            );
        }
        if buf.dropped > 0 {
            tracing::warn!(
                plugin = %tag.plugin,
                digest = %tag.digest,
                stream,
                dropped_bytes = buf.dropped,
                "plugin output exceeded the capture limit; the rest was dropped"
            );
        }
    }

    /// The last non-empty line written (a Rust guest's panic message ends up there).
    pub fn last_line(&self, max_bytes: usize) -> Option<String> {
        let buf = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let text = String::from_utf8_lossy(&buf.bytes);
        let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
        // A panic is usually followed by the "note: run with RUST_BACKTRACE" hint.
        let mut last = lines.next_back()?;
        if last.starts_with("note:")
            && let Some(previous) = lines.next_back()
        {
            last = previous;
        }
        Some(truncate(last, max_bytes, Marker::Length).into_owned())
    }
}

impl IsTerminal for Capture {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for Capture {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for Capture {
    async fn ready(&mut self) {}
}

impl OutputStream for Capture {
    fn write(&mut self, bytes: bytes::Bytes) -> StreamResult<()> {
        self.push(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(64 << 10)
    }
}

impl tokio::io::AsyncWrite for Capture {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        data: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.push(data);
        std::task::Poll::Ready(Ok(data.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}
