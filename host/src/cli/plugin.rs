//! `workflow-operator plugin ...`: try a workflow-type plugin without a cluster.
//!
//! Every subcommand loads the plugin in the same sandbox, with the same limits, as the
//! operator, and `render` goes through the controller's own code path
//! ([`crate::render::render_workflow`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context as _, anyhow, bail};
use workflow_model::text::printable;

use crate::api::WorkflowGroup;
use crate::oci;
use crate::plugin::{Plugin, Runtime, RuntimeConfig, StepOutcome, Verdict};
use crate::render::{render_workflow, workflow_context};
use workflow_model::TargetReport;

use super::scaffold::{self, NewArgs};

/// Tools for plugin authors.
#[derive(Debug, clap::Subcommand)]
pub enum PluginCommand {
    /// Create a new plugin crate, ready to build: Cargo.toml depending on the SDK, the
    /// stack-size flag, a params example with a default and a rename, unit tests, and a
    /// group.yaml to render it with.
    New(NewArgs),
    /// Print what a plugin says about itself (type, versions, digest, size, parameter
    /// schema), or why it cannot be loaded.
    Inspect {
        /// The plugin, a `.wasm` component.
        file: PathBuf,
    },
    /// Publish a plugin to an OCI registry as a Wasm artifact and print the reference, pinned
    /// to its digest, that a plugin ConfigMap names it by. Credentials, when the registry
    /// wants them: WORKFLOW_REGISTRY_USERNAME and WORKFLOW_REGISTRY_PASSWORD.
    Push {
        /// The plugin, a `.wasm` component (checked as the operator would load it).
        file: PathBuf,
        /// Where to: `oci://<registry>/<repository>[:<tag>]`; the tag is the plugin's version
        /// when none is given.
        reference: String,
        /// Speak plain HTTP to the registry (a registry on loopback).
        #[arg(long)]
        insecure: bool,
    },
    /// Print the Workflow YAML the operator would create for the plugin's type from a group.
    Render {
        /// The plugin, a `.wasm` component.
        file: PathBuf,
        /// A WorkflowGroup YAML whose `workflowSteps` contains the plugin's type.
        #[arg(long)]
        group: PathBuf,
    },
    /// Print the plugin's verdict (completed, failed: REASON, retry: REASON) on one finished
    /// attempt of a step. Exit status: 0 completed, 3 failed, 4 retry (1 an error).
    Eval {
        /// The plugin, a `.wasm` component.
        file: PathBuf,
        /// A WorkflowGroup YAML whose `workflowSteps` contains the plugin's type.
        #[arg(long)]
        group: PathBuf,
        /// The step, by name, as the plugin's template names it.
        #[arg(long)]
        step: String,
        /// The exit code of the step's container (0 means its pod succeeded).
        #[arg(long, allow_negative_numbers = true)]
        exit_code: i32,
        /// The container's termination message (its last output).
        #[arg(long, default_value = "")]
        message: String,
        /// Which attempt this was, from 1.
        #[arg(long, default_value_t = 1)]
        attempt: u32,
    },
}

/// Exit status of `plugin eval` for a `failed` verdict.
pub const EXIT_FAILED: u8 = 3;
/// Exit status of `plugin eval` for a `retry` verdict.
pub const EXIT_RETRY: u8 = 4;

/// Runs a `plugin` subcommand, printing its result on stdout. Returns the exit status: 0, or
/// for `eval` the verdict's ([`EXIT_FAILED`], [`EXIT_RETRY`]; `completed` is 0), so scripts
/// can act on it. An error exits 1 and a usage error 2.
///
/// # Errors
/// One line saying why: the plugin cannot be loaded, the group cannot be read, the type is
/// not in the group, the step is unknown, the plugin failed, or `new` could not write the crate.
pub fn run(cmd: PluginCommand) -> anyhow::Result<u8> {
    // The sandbox, as the operator configures it, for the commands that load a plugin.
    let runtime = || Runtime::new(RuntimeConfig::default());
    match cmd {
        PluginCommand::New(args) => scaffold::run(&args).map(|()| 0),
        PluginCommand::Inspect { file } => inspect(&runtime()?, &file).map(|()| 0),
        PluginCommand::Push {
            file,
            reference,
            insecure,
        } => push(&runtime()?, &file, &reference, insecure).map(|()| 0),
        PluginCommand::Render { file, group } => {
            let plugin = load(&runtime()?, &file)?;
            let group = read_group(&group)?;
            let workflow = render_workflow(&group, &plugin, now())
                .map_err(|e| anyhow!("cannot render {}: {e}", plugin.type_name()))?;
            let yaml =
                serde_saphyr::to_string(&workflow).context("cannot print the Workflow as YAML")?;
            print!("{yaml}");
            Ok(0)
        }
        PluginCommand::Eval {
            file,
            group,
            step,
            exit_code,
            message,
            attempt,
        } => {
            let plugin = load(&runtime()?, &file)?;
            let group = read_group(&group)?;
            let verdict = eval(&plugin, &group, &step, exit_code, message, attempt)?;
            println!("{}", format_verdict(&verdict));
            Ok(match verdict {
                Verdict::Completed => 0,
                Verdict::Failed(_) => EXIT_FAILED,
                Verdict::Retry(_) => EXIT_RETRY,
            })
        }
    }
}

fn inspect(runtime: &Runtime, file: &Path) -> anyhow::Result<()> {
    let plugin = load(runtime, file)?;
    let info = plugin.info();
    let schema = serde_json::to_string_pretty(&info.params_schema)
        .context("cannot print the params schema")?;
    println!("file:             {}", file.display());
    println!("type:             {}", info.type_name);
    println!("version:          {}", printable(&info.version, 256));
    println!(
        "contract version: workflow:plugin@{}",
        plugin.contract_version()
    );
    println!("digest:           sha256:{}", plugin.digest());
    println!("size:             {} bytes", plugin.size());
    println!("description:      {}", printable(&info.description, 4096));
    println!("params schema:");
    println!("{schema}");
    Ok(())
}

fn push(runtime: &Runtime, file: &Path, reference: &str, insecure: bool) -> anyhow::Result<()> {
    let plugin = load(runtime, file)?;
    let info = plugin.info();
    let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let auth = match (
        std::env::var("WORKFLOW_REGISTRY_USERNAME"),
        std::env::var("WORKFLOW_REGISTRY_PASSWORD"),
    ) {
        (Ok(user), Ok(password)) => oci_client::secrets::RegistryAuth::Basic(user, password),
        _ => oci_client::secrets::RegistryAuth::Anonymous,
    };
    let options = oci::PushOptions {
        insecure,
        auth,
        type_name: info.type_name.clone(),
        version: info.version.clone(),
        description: info.description.clone(),
    };
    let pinned = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?
        .block_on(oci::push(bytes, reference, &options))
        .map_err(|e| anyhow!(e))?;
    println!("{pinned}");
    Ok(())
}

fn eval(
    plugin: &Plugin,
    group: &WorkflowGroup,
    step_name: &str,
    exit_code: i32,
    message: String,
    attempt: u32,
) -> anyhow::Result<Verdict> {
    // The steps as the operator would create them: the same params checks and template.
    let workflow = render_workflow(group, plugin, now())
        .map_err(|e| anyhow!("cannot evaluate {}: {e}", plugin.type_name()))?;
    let context = workflow_context(&workflow, now());
    let steps = workflow.spec.steps;
    let Some(step) = steps.iter().find(|s| s.name == step_name) else {
        let names: Vec<&str> = steps.iter().map(|s| s.name.as_str()).collect();
        bail!(
            "workflow type {} has no step {step_name:?}; its steps are: {}",
            plugin.type_name(),
            names.join(", ")
        );
    };
    // As the operator does: a runner's report in the message is the per-target evidence.
    let outcome = StepOutcome {
        succeeded: exit_code == 0,
        exit_code: Some(exit_code),
        targets: TargetReport::parse(&message),
        message,
        attempt,
        duration_ms: 0,
    };
    plugin
        .evaluate(step, &outcome, &context)
        .map_err(|e| anyhow!("{e}"))
}

/// `completed`, `failed: <reason>`, `retry: <reason>`.
pub fn format_verdict(verdict: &Verdict) -> String {
    // The reason is the plugin's text: escaped, so it cannot drive the terminal.
    match verdict {
        Verdict::Completed => "completed".to_string(),
        Verdict::Failed(reason) => format!("failed: {}", printable(reason, 4096)),
        Verdict::Retry(reason) => format!("retry: {}", printable(reason, 4096)),
    }
}

pub(super) fn load(runtime: &Runtime, file: &Path) -> anyhow::Result<Arc<Plugin>> {
    let bytes =
        std::fs::read(file).map_err(|e| anyhow!("cannot read plugin {}: {e}", file.display()))?;
    runtime
        .load(&bytes, &file.display().to_string())
        .map_err(|e| anyhow!("{e}"))
}

pub(super) fn read_group(path: &Path) -> anyhow::Result<WorkflowGroup> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow!("cannot read group {}: {e}", path.display()))?;
    let group: WorkflowGroup = serde_saphyr::from_str(&text).map_err(|e| {
        // The parser's message comes with a source snippet on further lines: keep the line
        // that says what and where.
        let message = e.to_string();
        let first = message.lines().next().unwrap_or_default();
        let first = first.strip_prefix("error: ").unwrap_or(first);
        anyhow!("{} is not a WorkflowGroup: {first}", path.display())
    })?;
    // What the CRD and the webhook would refuse at apply.
    if let Some(refused) = group.spec.words_problem() {
        return Err(anyhow!("{} would be refused: {refused}", path.display()));
    }
    Ok(group)
}

fn now() -> i64 {
    k8s_openapi::jiff::Timestamp::now().as_second()
}
