//! Workflow-type plugins: WebAssembly components run in a sandbox, and the registry that
//! loads them from a directory and reloads them when it changes.
//!
//! Nothing here knows Kubernetes: the controllers convert their objects into the plain
//! [`types`] and ask the [`PluginRegistry`] for a [`Plugin`] of a type.

#[cfg(feature = "bench")]
mod bench;
#[allow(unsafe_code, missing_docs)]
mod bindings;
mod call;
mod config;
mod contract;
mod driver;
mod engine;
mod error;
mod load;
mod metrics;
mod origin;
mod registry;
mod runtime;
mod sandbox;
mod scan;
mod schema;
pub mod types;
mod validate;
mod wit_edge;

#[cfg(feature = "bench")]
pub use bench::WarmInstance;
pub use config::RuntimeConfig;
pub use error::{CONTRACT_VERSION, IoError, PluginError, PluginErrorKind};
pub use metrics::PluginMetrics;
pub use origin::Origin;
pub use registry::{LoadedType, PluginRegistry, ScanReport, SourceFile, WatchGuard};
pub use runtime::{Plugin, Runtime};
pub use scan::{KeptVersion, LoadProblem, ProblemKind};
pub use types::{EnvVar, Gate, GroupContext, PluginInfo, Step, StepOutcome, Target, Verdict};
