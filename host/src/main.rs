//! The `workflow-operator` binary: wires the pieces together, nothing more.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use tracing::info;
use workflow_operator::cli::plugin::PluginCommand;
use workflow_operator::controllers::status::printable;
use workflow_operator::controllers::{self, Metrics, OperatorConfig};
use workflow_operator::http::{self, Readiness};
use workflow_operator::plugin::{PluginMetrics, PluginRegistry, Runtime, RuntimeConfig};

#[derive(Parser)]
#[command(
    name = "workflow-operator",
    version,
    about = "Runs WorkflowGroups whose workflow types are WebAssembly plugins"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the operator against the current kubeconfig (or in-cluster config).
    Run(RunArgs),
    /// Print the CustomResourceDefinitions as YAML.
    Crdgen,
    /// Tools for plugin authors: inspect, render and evaluate a plugin without a cluster.
    Plugin {
        #[command(subcommand)]
        command: PluginCommand,
    },
}

#[derive(clap::Args)]
struct RunArgs {
    /// Directory of `*.wasm` workflow type plugins, watched for changes (a mounted ConfigMap).
    #[arg(
        long,
        env = "WORKFLOW_PLUGIN_DIR",
        default_value = "/etc/workflow-operator/plugins"
    )]
    plugin_dir: PathBuf,
    /// Image of a step's container when the step names none.
    #[arg(long, env = "WORKFLOW_DEFAULT_IMAGE", default_value = "busybox:1.36")]
    default_image: String,
    /// Address of the health, readiness, metrics and plugins endpoints.
    #[arg(long, env = "WORKFLOW_HTTP_ADDR", default_value = "127.0.0.1:8080")]
    http_addr: std::net::SocketAddr,
    /// Time limit of one plugin call, in milliseconds.
    #[arg(long, env = "WORKFLOW_PLUGIN_TIMEOUT_MS", default_value_t = 1000)]
    plugin_timeout_ms: u64,
    /// Memory limit of one plugin call, in MiB.
    #[arg(long, env = "WORKFLOW_PLUGIN_MEMORY_MIB", default_value_t = 64)]
    plugin_memory_mib: u64,
    /// Watch only this namespace (all namespaces when unset).
    #[arg(long, env = "WORKFLOW_NAMESPACE")]
    namespace: Option<String>,
    /// Log format: `text` for people, `json` (one object per line) for log pipelines.
    #[arg(long, env = "WORKFLOW_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Crdgen => print_crds().map(|()| 0),
        Command::Plugin { command } => workflow_operator::cli::plugin::run(command),
        Command::Run(args) => run(args).map(|()| 0),
    };
    match result {
        Ok(status) => ExitCode::from(status),
        Err(error) => {
            // One line a user can act on: the error and its causes, with any plugin text in
            // them escaped (no raw newlines or terminal sequences) and cut.
            let chain: Vec<String> = error.chain().map(ToString::to_string).collect();
            eprintln!("error: {}", printable(&chain.join(": "), 8192));
            ExitCode::FAILURE
        }
    }
}

fn print_crds() -> anyhow::Result<()> {
    print!("{}", workflow_operator::api::crds_yaml()?);
    Ok(())
}

fn init_logs(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| "info,kube=warn,wasmtime=warn,cranelift=warn".into());
    let logs = tracing_subscriber::fmt().with_env_filter(filter);
    match format {
        LogFormat::Text => logs
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
            .init(),
        // Each line an object with the reconcile span's fields (controller, namespace, name).
        LogFormat::Json => logs.json().with_current_span(true).init(),
    }
}

fn run(args: RunArgs) -> anyhow::Result<()> {
    init_logs(args.log_format);
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        let config = RuntimeConfig {
            call_timeout: std::time::Duration::from_millis(args.plugin_timeout_ms),
            memory_limit_bytes: args.plugin_memory_mib * 1024 * 1024,
            ..RuntimeConfig::default()
        };
        let mut prometheus = prometheus_client::registry::Registry::default();
        let plugin_metrics = PluginMetrics::register(&mut prometheus);
        let registry = PluginRegistry::new(Runtime::new(config)?.with_metrics(plugin_metrics));
        let report = registry.load_dir(&args.plugin_dir);
        info!(dir = %args.plugin_dir.display(), ?report, "loaded plugins");
        let _watch = registry.watch(&args.plugin_dir)?;
        let readiness = Readiness::default();
        readiness.set_plugins_loaded();

        let metrics = Arc::new(Metrics::register(&mut prometheus));
        let counted = metrics.clone();
        let count_requests = tower::util::MapRequestLayer::new(
            move |request: ::http::Request<kube::client::Body>| {
                counted.api_request(
                    request.method().as_str(),
                    request.uri().path(),
                    request.uri().query(),
                );
                request
            },
        );
        let client = kube::client::ClientBuilder::try_from(kube::Config::infer().await?)?
            .with_layer(&count_requests)
            .build();
        tokio::spawn(http::serve(
            args.http_addr,
            Arc::new(prometheus),
            registry.clone(),
            readiness.clone(),
        ));
        controllers::run(
            client,
            registry,
            OperatorConfig {
                default_image: args.default_image,
                namespace: args.namespace,
            },
            metrics,
            readiness,
        )
        .await;
        Ok(())
    })
}
