//! Plugins from ConfigMaps, read through the API: every `*.wasm` entry of every ConfigMap
//! that matches a label selector in one namespace feeds the [`PluginRegistry`] as one source.
//!
//! Read through a watch rather than a mounted volume, a change is live as soon as the watch
//! event arrives and the plugin is compiled (well under a second), where a volume waits for
//! the kubelet's sync period (60 to 90 s). One ConfigMap per plugin keeps each under the
//! API server's 1 MiB limit; several entries in one ConfigMap work as well.
//!
//! A plugin too big for a ConfigMap is named instead: a `data` entry `<type>.wasm` whose
//! value is `oci://<registry>/<repository>@sha256:<digest>` (or `:<tag>`, resolved once and
//! pinned) is pulled from that registry by the [`Puller`], with the credentials of the
//! `kubernetes.io/dockerconfigjson` Secret the ConfigMap's annotation
//! `workflow.rxg456.cn/pull-secret` names. Until it is pulled, the entry is a problem (the
//! last good version of its type keeps serving); each pull that ends loads the source again.

use std::collections::BTreeMap;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use tracing::{info, warn};

use crate::controllers::reason;
use crate::oci::{self, Puller};
use crate::plugin::{LoadProblem, Origin, PluginError, PluginRegistry, ProblemKind, SourceFile};
use workflow_model::text::printable;

/// The label that marks a ConfigMap as holding plugins (any value).
pub const PLUGIN_LABEL: &str = "workflow.rxg456.cn/plugin";
/// The annotation of a plugin ConfigMap naming the Secret its OCI references are pulled with.
pub const PULL_SECRET_ANNOTATION: &str = "workflow.rxg456.cn/pull-secret";
/// The pull Secret the install lets the operator read.
pub const DEFAULT_PULL_SECRET: &str = "workflow-operator-plugin-pull";

/// The name of this source in the registry.
const SOURCE: &str = "configmaps";

/// Where plugin ConfigMaps are read from.
#[derive(Clone, Debug)]
pub struct ConfigMapSource {
    pub namespace: String,
    /// A label selector, as `kubectl get -l` takes it.
    pub selector: String,
    /// Pulls the entries that name OCI artifacts.
    pub puller: Puller,
}

/// Watches the ConfigMaps of `source` and keeps the registry's `configmaps` source equal to
/// their `*.wasm` entries, until the watch ends. `loaded` is called once, after the first
/// complete list has been loaded. A broken entry is reported by the registry (its problems,
/// the log) and as a Warning Event on its ConfigMap; the last good version keeps serving.
pub async fn watch(
    client: Client,
    registry: PluginRegistry,
    source: ConfigMapSource,
    reporter: Reporter,
    loaded: impl FnOnce() + Send,
) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &source.namespace);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &source.namespace);
    let recorder = Recorder::new(client, reporter);
    let config = watcher::Config::default().labels(&source.selector);
    let mut events = watcher(api, config).default_backoff().boxed();
    let mut seen = Seen::default();
    let mut loaded = Some(loaded);
    let mut reported: Vec<LoadProblem> = Vec::new();
    info!(namespace = %source.namespace, selector = %source.selector, "watching plugin ConfigMaps");
    loop {
        // A pull that ended (or a failed one due again) loads the source again too.
        let event = tokio::select! {
            event = events.next() => match event {
                Some(event) => Some(event),
                None => break,
            },
            () = source.puller.changed() => None,
        };
        let load = match event {
            Some(Ok(event)) => seen.saw(event),
            Some(Err(error)) => {
                warn!(%error, namespace = %source.namespace, "plugin ConfigMap watch");
                false
            }
            None => seen.synced,
        };
        if !load {
            continue;
        }
        let current = &seen.current;
        let references = references(&source.namespace, current.values());
        let docker_configs = pull_secrets(&secrets, &references).await;
        let files = plugin_files(&source.namespace, current.values());
        let loader = registry.clone();
        let puller = source.puller.clone();
        let report = match tokio::task::spawn_blocking(move || {
            let mut files = files;
            files.extend(pulled_files(&puller, references, &docker_configs));
            loader.load_source(SOURCE, files, None)
        })
        .await
        {
            Ok(report) => report,
            Err(error) => {
                warn!(%error, "loading plugins from ConfigMaps");
                continue;
            }
        };
        if let Some(loaded) = loaded.take() {
            info!(
                namespace = %source.namespace,
                types = report.loaded.len(),
                problems = report.problems.len(),
                "loaded plugins from ConfigMaps"
            );
            loaded();
        }
        warn_on_configmaps(
            &recorder,
            &source.namespace,
            current,
            &report.problems,
            &mut reported,
        )
        .await;
    }
}

/// The plugin ConfigMaps as the watch has shown them.
#[derive(Default)]
struct Seen {
    /// What a re-list has shown so far.
    listing: BTreeMap<String, ConfigMap>,
    /// The ConfigMaps that are, by name, once a list has completed.
    current: BTreeMap<String, ConfigMap>,
    synced: bool,
}

impl Seen {
    /// Takes in `event`; whether the plugins are to be loaded again from `current`: a list
    /// has completed, and this event changed what is (a re-list changes nothing until it is
    /// done).
    fn saw(&mut self, event: watcher::Event<ConfigMap>) -> bool {
        match event {
            watcher::Event::Init => {
                self.listing.clear();
                return false;
            }
            watcher::Event::InitApply(cm) => {
                self.listing.insert(cm.name_any(), cm);
                return false;
            }
            watcher::Event::InitDone => {
                self.current = std::mem::take(&mut self.listing);
                self.synced = true;
            }
            watcher::Event::Apply(cm) => {
                self.current.insert(cm.name_any(), cm);
            }
            watcher::Event::Delete(cm) => {
                self.current.remove(&cm.name_any());
            }
        }
        self.synced
    }
}

/// The `*.wasm` entries of `configmaps`, each with its [`Origin::ConfigMap`].
fn plugin_files<'a>(
    namespace: &str,
    configmaps: impl Iterator<Item = &'a ConfigMap>,
) -> Vec<SourceFile> {
    let mut files = Vec::new();
    for cm in configmaps {
        let name = cm.name_any();
        let binary = cm.binary_data.iter().flatten();
        let text = cm.data.iter().flatten();
        let mut entries: Vec<SourceFile> = binary
            .filter(|(key, _)| key.ends_with(".wasm"))
            .map(|(key, bytes)| SourceFile {
                origin: origin(namespace, &name, key),
                bytes: Ok(bytes.0.clone()),
            })
            .chain(
                text.filter(|(key, value)| key.ends_with(".wasm") && !is_reference(value))
                    .map(|(key, _)| SourceFile {
                        origin: origin(namespace, &name, key),
                        bytes: Err(PluginError::NotBinaryData { key: key.clone() }),
                    }),
            )
            .collect();
        let named = cm
            .data
            .iter()
            .flatten()
            .any(|(key, value)| key.ends_with(".wasm") && is_reference(value));
        if entries.is_empty() && !named {
            entries.push(SourceFile {
                origin: origin(namespace, &name, "*.wasm"),
                bytes: Err(PluginError::NoPluginEntry {
                    namespace: namespace.to_string(),
                    name: name.clone(),
                }),
            });
        }
        files.append(&mut entries);
    }
    files
}

/// Whether a `data` value names an OCI artifact rather than holding a plugin.
fn is_reference(value: &str) -> bool {
    value.trim_start().starts_with(oci::SCHEME)
}

/// A `data` entry naming an OCI artifact, and the Secret to pull it with.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Reference {
    origin: Origin,
    reference: String,
    pull_secret: Option<String>,
}

/// The `*.wasm` entries of `configmaps` that name OCI artifacts.
fn references<'a>(
    namespace: &str,
    configmaps: impl Iterator<Item = &'a ConfigMap>,
) -> Vec<Reference> {
    let mut found = Vec::new();
    for cm in configmaps {
        let name = cm.name_any();
        let pull_secret = cm.annotations().get(PULL_SECRET_ANNOTATION).cloned();
        for (key, value) in cm.data.iter().flatten() {
            if key.ends_with(".wasm") && is_reference(value) {
                found.push(Reference {
                    origin: origin(namespace, &name, key),
                    reference: value.trim().to_string(),
                    pull_secret: pull_secret.clone(),
                });
            }
        }
    }
    found
}

/// The `.dockerconfigjson` of every Secret `references` name, by name, or why it is not there.
async fn pull_secrets(
    secrets: &Api<Secret>,
    references: &[Reference],
) -> BTreeMap<String, Result<Option<Vec<u8>>, String>> {
    let mut found = BTreeMap::new();
    for name in references.iter().filter_map(|r| r.pull_secret.as_ref()) {
        if found.contains_key(name) {
            continue;
        }
        let read = match secrets.get_opt(name).await {
            Ok(Some(secret)) => Ok(secret
                .data
                .and_then(|mut data| data.remove(oci::DOCKER_CONFIG_KEY))
                .map(|bytes| bytes.0)),
            Ok(None) => Err(format!("its pull secret {name:?} does not exist")),
            Err(kube::Error::Api(status)) if status.code == 403 => Err(format!(
                "may not read its pull secret {name:?}: the operator reads only the Secrets its Role names ({DEFAULT_PULL_SECRET} in the install's deploy/rbac.yaml)"
            )),
            Err(error) => Err(format!("cannot read its pull secret {name:?}: {error}")),
        };
        found.insert(name.clone(), read);
    }
    found
}

/// The bytes of each referenced artifact, once pulled, or why not yet (each unpulled
/// reference starts or waits for its pull). Blocks on the disk.
fn pulled_files(
    puller: &Puller,
    references: Vec<Reference>,
    docker_configs: &BTreeMap<String, Result<Option<Vec<u8>>, String>>,
) -> Vec<SourceFile> {
    let kept: Vec<&str> = references.iter().map(|r| r.reference.as_str()).collect();
    puller.retain(&kept);
    references
        .iter()
        .map(|r| {
            let failed = |reason: String| PluginError::Pull {
                reference: r.reference.clone(),
                reason,
            };
            let auth = match &r.pull_secret {
                None => Ok(oci_client::secrets::RegistryAuth::Anonymous),
                Some(name) => match docker_configs.get(name) {
                    Some(Ok(config)) => {
                        let registry = oci::parse_reference(&r.reference)
                            .map(|parsed| parsed.resolve_registry().to_string())
                            .unwrap_or_default();
                        oci::registry_auth(config.as_deref(), &registry)
                            .map_err(|e| failed(format!("pull secret {name:?}: {e}")))
                    }
                    Some(Err(e)) => Err(failed(e.clone())),
                    None => Err(failed(format!("its pull secret {name:?} was not read"))),
                },
            };
            SourceFile {
                origin: r.origin.clone(),
                bytes: auth.and_then(|auth| puller.offer(&r.reference, auth)),
            }
        })
        .collect()
}

fn origin(namespace: &str, name: &str, key: &str) -> Origin {
    Origin::ConfigMap {
        namespace: namespace.to_string(),
        name: name.to_string(),
        key: key.to_string(),
    }
}

/// The ConfigMap and the entry a problem is about, when it is a ConfigMap's in `namespace`.
fn configmap_entry<'a>(namespace: &str, problem: &'a LoadProblem) -> Option<(&'a str, &'a str)> {
    match &problem.file {
        Origin::ConfigMap {
            namespace: ns,
            name,
            key,
        } if ns == namespace => Some((name, key)),
        _ => None,
    }
}

/// One Warning Event per new problem of a ConfigMap entry, on that ConfigMap.
async fn warn_on_configmaps(
    recorder: &Recorder,
    namespace: &str,
    current: &BTreeMap<String, ConfigMap>,
    problems: &[LoadProblem],
    reported: &mut Vec<LoadProblem>,
) {
    for problem in problems {
        if reported.contains(problem) {
            continue;
        }
        let Some((cm, entry)) = configmap_entry(namespace, problem)
            .and_then(|(name, entry)| Some((current.get(name)?, entry)))
        else {
            continue;
        };
        let pulling = matches!(
            &problem.kind,
            ProblemKind::Failed {
                error: PluginError::Pulling { .. },
                ..
            }
        );
        let event = Event {
            type_: if pulling {
                EventType::Normal
            } else {
                EventType::Warning
            },
            reason: if pulling {
                reason::PLUGIN_PULLING
            } else {
                reason::PLUGIN_INVALID
            }
            .into(),
            note: Some(printable(&problem.message(), 1000)),
            action: format!("Load {}", printable(entry, 64)),
            secondary: None,
        };
        if let Err(error) = recorder.publish(&event, &cm.object_ref(&())).await {
            warn!(%error, configmap = %cm.name_any(), "could not publish event");
        }
    }
    // Forget what is fixed, so that breaking it again is reported again.
    *reported = problems.to_vec();
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    #[test]
    fn plugins_load_again_only_once_a_list_is_complete_and_a_relist_changes_nothing_until_done() {
        let (a, b) = (configmap("a", &[], &[]), configmap("b", &[], &[]));
        let mut seen = Seen::default();
        assert!(!seen.saw(watcher::Event::Init));
        assert!(!seen.saw(watcher::Event::InitApply(a.clone())));
        assert!(seen.current.is_empty(), "a list in progress is not what is");
        assert!(seen.saw(watcher::Event::InitDone));
        assert_eq!(seen.current.keys().collect::<Vec<_>>(), ["a"]);
        assert!(seen.saw(watcher::Event::Apply(b.clone())));
        assert!(seen.saw(watcher::Event::Delete(a)));
        assert_eq!(seen.current.keys().collect::<Vec<_>>(), ["b"]);
        // A re-list that no longer shows `b` replaces what is only when it completes.
        assert!(!seen.saw(watcher::Event::Init));
        assert_eq!(seen.current.keys().collect::<Vec<_>>(), ["b"]);
        assert!(seen.saw(watcher::Event::InitDone));
        assert!(seen.current.is_empty());
    }

    fn configmap(name: &str, binary: &[(&str, &[u8])], data: &[(&str, &str)]) -> ConfigMap {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(name.into());
        cm.binary_data = Some(
            binary
                .iter()
                .map(|(k, v)| ((*k).to_string(), ByteString(v.to_vec())))
                .collect(),
        );
        cm.data = Some(
            data.iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                .collect(),
        );
        cm
    }

    #[test]
    fn every_wasm_entry_of_binary_data_is_a_plugin_file_and_other_keys_are_ignored() {
        let cms = [configmap(
            "two",
            &[("a.wasm", b"A"), ("b.wasm", b"B"), ("notes.txt", b"x")],
            &[("README", "text")],
        )];
        let files = plugin_files("ops", cms.iter());
        let origins: Vec<_> = files.iter().map(|f| f.origin.clone()).collect();
        assert_eq!(
            origins,
            [
                origin("ops", "two", "a.wasm"),
                origin("ops", "two", "b.wasm")
            ]
        );
        assert_eq!(origins[0].to_string(), "configmap/ops/two/a.wasm");
        assert_eq!(files[1].bytes.as_deref(), Ok(&b"B"[..]));
    }

    #[test]
    fn a_labelled_configmap_without_plugins_or_with_a_plugin_in_text_data_is_a_problem() {
        let cms = [
            configmap("empty", &[], &[("x.txt", "text")]),
            configmap("text", &[], &[("t.wasm", "not binary")]),
        ];
        let files = plugin_files("ops", cms.iter());
        assert_eq!(files.len(), 2);
        assert_eq!(files[0].origin, origin("ops", "empty", "*.wasm"));
        let empty = files[0].bytes.as_ref().expect_err("no wasm entry");
        assert_eq!(
            empty,
            &PluginError::NoPluginEntry {
                namespace: "ops".into(),
                name: "empty".into()
            }
        );
        let empty = empty.to_string();
        assert!(
            empty.contains("ops/empty") && empty.contains("no *.wasm entry"),
            "{empty}"
        );
        assert_eq!(files[1].origin, origin("ops", "text", "t.wasm"));
        let text = files[1]
            .bytes
            .as_ref()
            .expect_err("wasm in data")
            .to_string();
        assert!(text.contains("binaryData"), "{text}");
    }

    #[test]
    fn a_problem_names_the_configmap_it_came_from_only_in_its_namespace() {
        let problem = |file: Origin| {
            LoadProblem::failed(
                file,
                PluginError::NotBinaryData {
                    key: "a.wasm".into(),
                },
            )
        };
        assert_eq!(
            configmap_entry("ops", &problem(origin("ops", "my-type", "my-type.wasm"))),
            Some(("my-type", "my-type.wasm"))
        );
        assert_eq!(
            configmap_entry("ops", &problem(origin("opsx", "a", "a.wasm"))),
            None
        );
        assert_eq!(
            configmap_entry("ops", &problem(Origin::File("/etc/plugins/a.wasm".into()))),
            None
        );
        // A file whose path merely looks like a ConfigMap's is a file.
        assert_eq!(
            configmap_entry(
                "ops",
                &problem(Origin::File("configmap/ops/a/a.wasm".into()))
            ),
            None
        );
    }
}
