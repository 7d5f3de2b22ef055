//! Why a plugin could not be loaded or called.

use std::sync::Arc;
use std::time::Duration;

use workflow_model::text;

/// The contract version this operator speaks, as in `plugin-sdk/wit/workflow-plugin.wit`.
pub const CONTRACT_VERSION: &str = "0.3.0";
/// The older contract versions whose plugins still load and work.
pub const OLDER_CONTRACT_VERSIONS: [&str; 2] = ["0.2.0", "0.1.0"];

/// Everything that can go wrong with a plugin, each with a message a user can act on.
///
/// `plugin` fields name the plugin as `<type> (<origin>)` once its type is known, or its
/// origin (usually the file) before that.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PluginError {
    /// The file could not be read.
    #[error("cannot read plugin {origin}: {source}")]
    Read {
        origin: String,
        #[source]
        source: IoError,
    },
    /// The directory of plugins could not be listed.
    #[error("cannot read plugin directory {dir}: {source}")]
    ReadDir {
        dir: String,
        #[source]
        source: IoError,
    },
    /// A ConfigMap holds a plugin in `data`, which takes only UTF-8 text, not in `binaryData`.
    #[error(
        "{key} is in the ConfigMap's data, where only UTF-8 text fits; create it with \
         `kubectl create configmap --from-file` so it lands in binaryData"
    )]
    NotBinaryData { key: String },
    /// A ConfigMap has the plugin label but no `*.wasm` entry.
    #[error("ConfigMap {namespace}/{name} has the plugin label but no *.wasm entry")]
    NoPluginEntry { namespace: String, name: String },
    /// A plugin named by an OCI reference is being pulled.
    #[error("pulling {reference}")]
    Pulling { reference: String },
    /// A plugin named by an OCI reference could not be pulled (tried again with back-off).
    #[error("cannot pull plugin {reference}: {reason}")]
    Pull { reference: String, reason: String },
    /// The bytes are not a WebAssembly component (garbage, or a core module).
    #[error("{origin} is not a WebAssembly component: {reason}")]
    NotAComponent { origin: String, reason: String },
    /// The component is valid WebAssembly but could not be compiled.
    #[error("cannot compile plugin {origin}: {reason}")]
    Compile { origin: String, reason: String },
    /// The component implements another version of the plugin contract.
    #[error(
        "{origin}: plugin was built for contract workflow:plugin@{found}, this operator speaks \
         workflow:plugin@{CONTRACT_VERSION} (and loads 0.2.0 and 0.1.0); rebuild it with a \
         workflow-plugin-sdk for workflow:plugin@{CONTRACT_VERSION}"
    )]
    WrongContract { origin: String, found: String },
    /// The component does not export the `workflow-type` interface.
    #[error(
        "{origin}: the component does not export workflow:plugin/workflow-type@{CONTRACT_VERSION} \
         (exports: {exports}); build it with workflow-plugin-sdk's export macro"
    )]
    MissingExport { origin: String, exports: String },
    /// The component needs an import the sandbox does not provide (for example HTTP).
    #[error("{origin}: {reason}; plugins get only WASI without any capability and host-log")]
    UnsupportedImport { origin: String, reason: String },
    /// The plugin's `info` is unusable (bad type name, schema that is not a JSON Schema, ...).
    #[error("plugin {plugin} describes itself badly: {reason}")]
    InvalidInfo { plugin: String, reason: String },
    /// The plugin trapped (a panic, an out-of-bounds access, a stack overflow, ...).
    #[error("plugin {plugin} crashed in {call}: {message}")]
    Trap {
        plugin: String,
        call: &'static str,
        message: String,
    },
    /// The call ran longer than the configured limit and was interrupted.
    #[error("plugin {plugin} exceeded its {} time limit in {call} and was stopped", format_duration(*.limit))]
    Timeout {
        plugin: String,
        call: &'static str,
        limit: Duration,
    },
    /// The plugin tried to use more memory than the configured limit.
    #[error("plugin {plugin} exhausted its memory limit of {} in {call} and was stopped", format_bytes(*.limit_bytes))]
    MemoryExhausted {
        plugin: String,
        call: &'static str,
        limit_bytes: u64,
    },
    /// The plugin could not be started for this call (for example: every instance slot busy).
    #[error("plugin {plugin} could not be started for {call}: {reason}")]
    Instantiate {
        plugin: String,
        call: &'static str,
        reason: String,
    },
    /// The plugin returned something the operator cannot use.
    #[error("plugin {plugin} returned invalid output from {call}: {reason}")]
    InvalidOutput {
        plugin: String,
        call: &'static str,
        reason: String,
    },
    /// The parameters given to a workflow type are invalid, per its schema or its `validate`.
    #[error("invalid parameters for workflow type {type_name}: {message}")]
    InvalidParams { type_name: String, message: String },
    /// The plugin refused to produce its steps (`template` returned an error).
    #[error("plugin {plugin} could not template the workflow: {message}")]
    TemplateFailed { plugin: String, message: String },
}

/// What kind of failure a [`PluginError`] is: the one classification the controllers, the
/// webhook and the metrics act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PluginErrorKind {
    /// The plugin's answer on its input: the params are invalid, or it refused to template.
    /// Asking again gives the same answer; the user must change the group.
    Refused,
    /// The same call may well succeed later: the plugin ran out of time (the machine may be
    /// loaded) or could not be started (every instance slot busy). Retried with backoff.
    Transient,
    /// The plugin misbehaved: it crashed, exhausted its memory, or answered with something
    /// unusable. Its author must fix it.
    Broken,
    /// The plugin could not be loaded at all (unreadable, not a component, another contract).
    CannotLoad,
}

impl PluginErrorKind {
    /// `plugin-refused`, `plugin-transient`, `plugin-broken` or `plugin-cannot-load`: the
    /// `kind` label of a reconcile error it caused.
    pub fn label(self) -> &'static str {
        match self {
            Self::Refused => "plugin-refused",
            Self::Transient => "plugin-transient",
            Self::Broken => "plugin-broken",
            Self::CannotLoad => "plugin-cannot-load",
        }
    }
}

impl PluginError {
    /// What kind of failure this is.
    pub fn kind(&self) -> PluginErrorKind {
        match self {
            PluginError::InvalidParams { .. } | PluginError::TemplateFailed { .. } => {
                PluginErrorKind::Refused
            }
            PluginError::Timeout { .. } | PluginError::Instantiate { .. } => {
                PluginErrorKind::Transient
            }
            PluginError::Trap { .. }
            | PluginError::MemoryExhausted { .. }
            | PluginError::InvalidOutput { .. }
            | PluginError::InvalidInfo { .. } => PluginErrorKind::Broken,
            PluginError::Read { .. }
            | PluginError::ReadDir { .. }
            | PluginError::NotBinaryData { .. }
            | PluginError::NoPluginEntry { .. }
            | PluginError::Pulling { .. }
            | PluginError::Pull { .. }
            | PluginError::NotAComponent { .. }
            | PluginError::Compile { .. }
            | PluginError::WrongContract { .. }
            | PluginError::MissingExport { .. }
            | PluginError::UnsupportedImport { .. } => PluginErrorKind::CannotLoad,
        }
    }

    /// Whether the same call may well succeed if made again later
    /// ([`PluginErrorKind::Transient`]); every other error is the plugin's or the input's
    /// answer, and asking again would give it again.
    pub fn is_transient(&self) -> bool {
        self.kind() == PluginErrorKind::Transient
    }
}

/// An I/O error that clones (shared) and compares (by kind and message) like the rest of a
/// [`PluginError`].
#[derive(Debug, Clone)]
pub struct IoError(Arc<std::io::Error>);

impl From<std::io::Error> for IoError {
    fn from(error: std::io::Error) -> Self {
        Self(Arc::new(error))
    }
}

impl IoError {
    /// The I/O error itself.
    pub fn io(&self) -> &std::io::Error {
        &self.0
    }
}

impl PartialEq for IoError {
    fn eq(&self, other: &Self) -> bool {
        self.0.kind() == other.0.kind() && self.0.to_string() == other.0.to_string()
    }
}

impl Eq for IoError {}

impl std::fmt::Display for IoError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

// The I/O error's own causes, not the I/O error again: the variant that holds it already
// names it as its source.
impl std::error::Error for IoError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

/// `1s`, `1500ms`.
pub(crate) fn format_duration(d: Duration) -> String {
    if d.subsec_millis() == 0 && d.as_secs() > 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// `64 MiB`, `1500 bytes`.
pub(crate) fn format_bytes(n: u64) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{} MiB", n >> 20)
    } else if n >= 1 << 10 && n.is_multiple_of(1 << 10) {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} bytes")
    }
}

/// The first 12 hex digits of a content digest, for logs.
pub(super) fn short_digest(digest: &str) -> &str {
    digest.get(..12).unwrap_or(digest)
}

/// Longest error chain kept in a [`PluginError`], in bytes.
const MAX_ERROR_LINE_BYTES: usize = 2048;

/// `error` and its causes on one line: error chains can span lines (wasm backtraces);
/// messages here are one line.
pub(super) fn error_line(error: &wasmtime::Error) -> String {
    text::one_line(&format!("{error:#}"), MAX_ERROR_LINE_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_timeouts_and_failed_starts_are_transient() {
        let timeout = PluginError::Timeout {
            plugin: "at".into(),
            call: "gate",
            limit: Duration::from_secs(1),
        };
        let instantiate = PluginError::Instantiate {
            plugin: "at".into(),
            call: "gate",
            reason: "all instance slots are busy".into(),
        };
        let trap = PluginError::Trap {
            plugin: "at".into(),
            call: "gate",
            message: "panicked".into(),
        };
        let params = PluginError::InvalidParams {
            type_name: "at".into(),
            message: "missing field `schedule`".into(),
        };
        assert!(timeout.is_transient() && instantiate.is_transient());
        assert!(!trap.is_transient() && !params.is_transient());
    }
}
