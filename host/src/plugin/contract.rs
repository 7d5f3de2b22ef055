//! The contract a plugin implements, and where its functions are in a compiled plugin.

use wasmtime::component::{Component, ComponentExportIndex};

use super::error::{CONTRACT_VERSION, OLDER_CONTRACT_VERSIONS, PluginError};

/// The name under which a plugin exports its functions, without the version.
pub(super) const EXPORT_NAME: &str = "workflow:plugin/workflow-type";

/// The contract version a plugin implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contract {
    /// `workflow:plugin@0.3.0`, [`CONTRACT_VERSION`].
    Current,
    /// `workflow:plugin@0.2.0`: steps without `rerun-with`, gates without `needs-approval`.
    V0_2,
    /// `workflow:plugin@0.1.0`: `evaluate(step, outcome)` without the context, and an outcome
    /// without the per-target report.
    V0_1,
}

impl Contract {
    /// Its version, e.g. `0.2.0`.
    pub fn version(self) -> &'static str {
        match self {
            Contract::Current => CONTRACT_VERSION,
            Contract::V0_2 => OLDER_CONTRACT_VERSIONS[0],
            Contract::V0_1 => OLDER_CONTRACT_VERSIONS[1],
        }
    }

    pub(super) fn of(version: &str) -> Option<Self> {
        [Contract::Current, Contract::V0_2, Contract::V0_1]
            .into_iter()
            .find(|c| c.version() == version)
    }
}

/// Where the contract's functions are in one compiled plugin, found once per compilation.
/// A call then looks up and typechecks only the function it calls, not all five as the
/// generated bindings do on every instantiation.
pub(super) struct Exports {
    pub info: ComponentExportIndex,
    pub validate: ComponentExportIndex,
    pub template: ComponentExportIndex,
    pub gate: ComponentExportIndex,
    pub evaluate: ComponentExportIndex,
}

impl Exports {
    pub(super) fn find(
        component: &Component,
        origin: &str,
        contract: Contract,
    ) -> Result<Self, PluginError> {
        let interface = format!("{EXPORT_NAME}@{}", contract.version());
        let missing = |what: String| PluginError::MissingExport {
            origin: origin.to_string(),
            exports: what,
        };
        let (_, instance) = component
            .get_export(None, interface.as_str())
            .ok_or_else(|| missing(format!("no {interface}")))?;
        let func = |name: &str| {
            component
                .get_export_index(Some(&instance), name)
                .ok_or_else(|| missing(format!("{interface} without `{name}`")))
        };
        Ok(Self {
            info: func("info")?,
            validate: func("validate")?,
            template: func("template")?,
            gate: func("gate")?,
            evaluate: func("evaluate")?,
        })
    }
}
