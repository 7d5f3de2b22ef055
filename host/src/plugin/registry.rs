//! The set of workflow types the operator can run: every `*.wasm` its sources offer (a
//! directory watched for changes, ConfigMaps read through the API), reloaded when a source
//! changes. A source hands over each file's [`Origin`] and bytes, and this module reads no
//! Kubernetes object. What a scan serves is decided by [`scan::decide`](super::scan::decide),
//! a pure function; this module loads the files and keeps its answer.
//!
//! A ConfigMap volume changes by an atomic swap of its `..data` symlink, which shows up as
//! a mix of create/remove/rename events on names that are not the plugin files. So every
//! event only triggers a debounced rescan, and the rescan decides from content digests what
//! changed: never from the kind of an event.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::Duration;

use notify::{RecursiveMode, Watcher as _};
use serde::Serialize;
use sha2::{Digest as _, Sha256};

use super::error::PluginError;
use super::origin::Origin;
use super::runtime::{Plugin, Runtime};
use super::scan::{self, LoadProblem, Offer, Serving};

/// How long the directory must be quiet before a rescan.
const DEBOUNCE: Duration = Duration::from_millis(200);

/// A workflow type being served.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadedType {
    pub type_name: String,
    /// The plugin's own version.
    pub version: String,
    /// sha256 of the plugin file, lowercase hex.
    pub digest: String,
    /// The file it was loaded from (serialized as its path, or as
    /// `configmap/<namespace>/<name>/<key>` for a ConfigMap entry).
    pub file: Origin,
}

/// One plugin file offered by a source: where it comes from and its bytes, or why they
/// could not be read.
#[derive(Debug, Clone)]
pub struct SourceFile {
    pub origin: Origin,
    pub bytes: Result<Vec<u8>, PluginError>,
}

/// The outcome of one scan of a plugin source.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScanReport {
    /// Every type served after the scan.
    pub loaded: Vec<LoadedType>,
    /// Every file that could not be used.
    pub problems: Vec<LoadProblem>,
    /// Whether the set of served types or digests changed.
    pub changed: bool,
}

/// The loaded workflow types. Cheap to clone; clones share everything.
///
/// # Guarantees
/// A type keeps being served by its last good version while its file is broken; two files
/// claiming one type never silently replace the current holder; every version loaded since
/// start stays reachable by digest through [`PluginRegistry::get_pinned`].
#[derive(Clone)]
pub struct PluginRegistry {
    inner: Arc<RegistryInner>,
}

struct RegistryInner {
    runtime: Runtime,
    state: Mutex<State>,
    /// Serialises scans (the watcher's and explicit ones).
    scan_lock: Mutex<()>,
    generation: tokio::sync::watch::Sender<u64>,
    /// Bumped whenever the problems change.
    problem_generation: tokio::sync::watch::Sender<u64>,
    /// How many scans of any source ran.
    scans: AtomicU64,
}

#[derive(Default)]
struct State {
    /// What is served, and what the next scan decides from.
    serving: Serving<Arc<Plugin>>,
    /// Every good version seen since start, by digest.
    versions: HashMap<String, Arc<Plugin>>,
    /// The last scan of each source, by source name; the served set follows their union.
    sources: BTreeMap<String, SourceScan>,
    problems: Vec<LoadProblem>,
    generation: u64,
}

#[derive(Clone, Default)]
struct SourceScan {
    loads: Vec<Offer<Arc<Plugin>>>,
    problem: Option<LoadProblem>,
}

/// Stops watching when dropped.
pub struct WatchGuard {
    _watcher: notify::RecommendedWatcher,
}

impl std::fmt::Debug for WatchGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WatchGuard")
    }
}

impl std::fmt::Debug for PluginRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginRegistry")
            .field("types", &self.types())
            .finish_non_exhaustive()
    }
}

impl PluginRegistry {
    /// An empty registry running plugins with `runtime`.
    pub fn new(runtime: Runtime) -> Self {
        let (generation, _) = tokio::sync::watch::channel(0);
        let (problem_generation, _) = tokio::sync::watch::channel(0);
        Self {
            inner: Arc::new(RegistryInner {
                runtime,
                state: Mutex::new(State::default()),
                scan_lock: Mutex::new(()),
                generation,
                problem_generation,
                scans: AtomicU64::new(0),
            }),
        }
    }

    /// The runtime plugins run in.
    pub fn runtime(&self) -> &Runtime {
        &self.inner.runtime
    }

    /// The current plugin of a workflow type.
    pub fn get(&self, type_name: &str) -> Option<Arc<Plugin>> {
        self.lock()
            .serving
            .current
            .get(type_name)
            .map(|s| s.plugin.clone())
    }

    /// The version of `type_name` whose content digest is `digest`, if it was loaded at any
    /// time since start (older versions stay in memory for Workflows that pinned them).
    pub fn get_pinned(&self, type_name: &str, digest: &str) -> Option<Arc<Plugin>> {
        self.lock()
            .versions
            .get(digest)
            .filter(|p| p.type_name() == type_name)
            .cloned()
    }

    /// The types served now, sorted by name.
    pub fn types(&self) -> Vec<LoadedType> {
        loaded_types(&self.lock())
    }

    /// The files that could not be used at the last scan.
    pub fn problems(&self) -> Vec<LoadProblem> {
        self.lock().problems.clone()
    }

    /// Why the file that would serve `type_name` is not used, when it is named so: a
    /// problem of `<type_name>.wasm` (a file, or a ConfigMap entry that may name an OCI
    /// artifact still being pulled). A plugin's type is known only once it loads, so its
    /// file's name is the only clue.
    pub fn problem_for(&self, type_name: &str) -> Option<LoadProblem> {
        let file = format!("{type_name}.wasm");
        self.lock()
            .problems
            .iter()
            .find(|p| match &p.file {
                Origin::File(path) => path.file_name().is_some_and(|n| *n == *file),
                Origin::ConfigMap { key, .. } => *key == file,
            })
            .cloned()
    }

    /// A receiver of the generation number, bumped whenever the set of types or their
    /// digests changes.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.generation.subscribe()
    }

    /// A receiver of a number bumped whenever the problems change (a group waiting for a
    /// type says why it is missing).
    pub fn subscribe_problems(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.problem_generation.subscribe()
    }

    /// Loads one file outside of any directory scan (for the CLI). The registry is unchanged.
    ///
    /// # Errors
    /// [`PluginError::Read`] when the file cannot be read, or any [`Runtime::load`] error.
    pub fn load_file(&self, path: &Path) -> Result<Arc<Plugin>, PluginError> {
        let bytes = read_file(path)?;
        self.inner.runtime.load(&bytes, &path.display().to_string())
    }

    /// Scans `dir`: loads every `*.wasm` in it (following symlinks, skipping dotfiles and
    /// directories) and makes the served set match, keeping the last good version of a type
    /// whose file is broken and reporting conflicts. A directory that cannot be read serves
    /// nothing and is reported as a problem.
    pub fn load_dir(&self, dir: &Path) -> ScanReport {
        let (files, problem) = read_dir_files(dir);
        self.load_source(&format!("dir:{}", dir.display()), files, problem)
    }

    /// Makes the files of `source` those it offers now: loads each, then serves the union
    /// of all sources' files as [`PluginRegistry::load_dir`] describes. A file whose content
    /// was loaded before (from any source) is not compiled again. `problem` is reported
    /// when the source itself could not be read whole.
    pub fn load_source(
        &self,
        source: &str,
        files: Vec<SourceFile>,
        problem: Option<LoadProblem>,
    ) -> ScanReport {
        let _scan = self
            .inner
            .scan_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.inner.scans.fetch_add(1, Ordering::Relaxed);
        // Compile outside the state lock: callers keep reading the old set meanwhile.
        let loads = files.into_iter().map(|file| self.load_one(file)).collect();
        let mut state = self.lock();
        state
            .sources
            .insert(source.to_string(), SourceScan { loads, problem });
        let (offers, source_problems) = union_of_sources(&state);
        for offer in &offers {
            if let Ok(plugin) = &offer.result {
                state
                    .versions
                    .insert(plugin.digest().to_string(), plugin.clone());
            }
        }
        let decision = scan::decide(&state.serving, offers, source_problems);
        log_new_problems(&state.problems, &decision.problems);
        let problems_changed = state.problems != decision.problems;
        state.serving = decision.serving;
        state.problems = decision.problems;
        let changed = decision.changed;
        if problems_changed {
            self.inner.problem_generation.send_modify(|g| *g += 1);
        }
        if changed {
            state.generation += 1;
            let generation = state.generation;
            self.inner.generation.send_replace(generation);
            tracing::info!(
                generation,
                types = ?loaded_types(&state)
                    .iter()
                    .map(|t| format!("{}@{} ({})", t.type_name, t.version, &t.digest[..12.min(t.digest.len())]))
                    .collect::<Vec<_>>(),
                "plugin set changed"
            );
        }
        ScanReport {
            loaded: loaded_types(&state),
            problems: state.problems.clone(),
            changed,
        }
    }

    /// How many scans of any source have run since start.
    pub fn scans(&self) -> u64 {
        self.inner.scans.load(Ordering::Relaxed)
    }

    /// Scans `dir` now, then again whenever anything in it changes (debounced by 200 ms),
    /// until the returned guard is dropped. Reading a file is no change: a scan reads every
    /// file, and inotify reports those opens (notify asks for them).
    ///
    /// # Errors
    /// When the directory cannot be watched (for example, it does not exist).
    pub fn watch(&self, dir: &Path) -> anyhow::Result<WatchGuard> {
        let (tx, rx) = mpsc::channel::<()>();
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                match &event {
                    Err(e) => tracing::warn!("plugin directory watch error: {e}; rescanning"),
                    // A read (our own scan's, or anyone's) changes nothing; rescanning on it
                    // would rescan for ever, every debounce.
                    Ok(event) if only_read(event.kind) => return,
                    Ok(_) => {}
                }
                // Any other event, of any kind, on any name: the rescan decides what changed.
                let _ = tx.send(());
            })
            .map_err(|e| anyhow::anyhow!("cannot watch plugin directory {}: {e}", dir.display()))?;
        watcher
            .watch(dir, RecursiveMode::NonRecursive)
            .map_err(|e| anyhow::anyhow!("cannot watch plugin directory {}: {e}", dir.display()))?;
        self.load_dir(dir);
        let registry = self.clone();
        let dir = dir.to_path_buf();
        thread::Builder::new()
            .name("plugin-watch".into())
            .spawn(move || {
                // Ends when the watcher (and with it the sender) is dropped.
                while rx.recv().is_ok() {
                    loop {
                        match rx.recv_timeout(DEBOUNCE) {
                            Ok(()) => continue,
                            Err(RecvTimeoutError::Timeout) => break,
                            Err(RecvTimeoutError::Disconnected) => return,
                        }
                    }
                    registry.load_dir(&dir);
                }
            })
            .map_err(|e| anyhow::anyhow!("cannot start the plugin watch thread: {e}"))?;
        Ok(WatchGuard { _watcher: watcher })
    }

    fn load_one(&self, file: SourceFile) -> Offer<Arc<Plugin>> {
        let result = file.bytes.and_then(|bytes| {
            let digest = hex::encode(Sha256::digest(&bytes));
            // Content loaded before: reuse the plugin as it is.
            if let Some(loaded) = self.lock().versions.get(&digest) {
                return Ok(loaded.clone());
            }
            self.inner.runtime.load(&bytes, &file.origin.to_string())
        });
        Offer {
            origin: file.origin,
            result,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// Whether an event in the plugin directory only tells of a file opened or closed without
/// writing.
fn only_read(kind: notify::EventKind) -> bool {
    use notify::event::{AccessKind, AccessMode, EventKind};
    matches!(kind, EventKind::Access(access) if access != AccessKind::Close(AccessMode::Write))
}

/// The `*.wasm` files of `dir` (following symlinks, skipping dotfiles and directories), sorted.
fn read_dir_files(dir: &Path) -> (Vec<SourceFile>, Option<LoadProblem>) {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => {
            let error = PluginError::ReadDir {
                dir: dir.display().to_string(),
                source: e.into(),
            };
            let problem = LoadProblem::failed(Origin::File(dir.to_path_buf()), error);
            return (Vec::new(), Some(problem));
        }
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| {
            path.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| !n.starts_with('.') && n.ends_with(".wasm"))
        })
        // `metadata` follows symlinks: `foo.wasm -> ..data/foo.wasm` is a file.
        .filter(|path| std::fs::metadata(path).is_ok_and(|m| m.is_file()))
        .collect();
    paths.sort();
    let files = paths
        .into_iter()
        .map(|path| SourceFile {
            bytes: read_file(&path),
            origin: Origin::File(path),
        })
        .collect();
    (files, None)
}

fn read_file(path: &Path) -> Result<Vec<u8>, PluginError> {
    std::fs::read(path).map_err(|e| PluginError::Read {
        origin: path.display().to_string(),
        source: e.into(),
    })
}

/// Every source's files and problems, as one scan.
fn union_of_sources(state: &State) -> (Vec<Offer<Arc<Plugin>>>, Vec<LoadProblem>) {
    let loads = state
        .sources
        .values()
        .flat_map(|scan| scan.loads.iter().cloned())
        .collect();
    let problems = state
        .sources
        .values()
        .filter_map(|scan| scan.problem.clone())
        .collect();
    (loads, problems)
}

/// Logs each problem of `now` that was not one at the scan before.
fn log_new_problems(before: &[LoadProblem], now: &[LoadProblem]) {
    for problem in now.iter().filter(|p| !before.contains(p)) {
        // A pull under way or failing is logged where it runs (`oci::Puller`).
        if let scan::ProblemKind::Failed {
            error: PluginError::Pulling { .. } | PluginError::Pull { .. },
            ..
        } = &problem.kind
        {
            continue;
        }
        tracing::error!(file = %problem.file, "cannot use plugin: {}", problem.message());
    }
}

fn loaded_types(state: &State) -> Vec<LoadedType> {
    state
        .serving
        .current
        .iter()
        .map(|(type_name, served)| LoadedType {
            type_name: type_name.clone(),
            version: served.plugin.info().version.clone(),
            digest: served.plugin.digest().to_string(),
            file: served.origin.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::RuntimeConfig;

    #[test]
    fn a_types_problem_is_that_of_the_file_or_entry_named_for_it() {
        let registry =
            PluginRegistry::new(Runtime::new(RuntimeConfig::default()).expect("runtime"));
        let pulling = |reference: &str| PluginError::Pulling {
            reference: reference.into(),
        };
        registry.load_source(
            "test",
            vec![
                SourceFile {
                    origin: Origin::File("/plugins/disk-check.wasm".into()),
                    bytes: Err(pulling("oci://r.example/a:1")),
                },
                SourceFile {
                    origin: Origin::ConfigMap {
                        namespace: "ops".into(),
                        name: "anything".into(),
                        key: "net-check.wasm".into(),
                    },
                    bytes: Err(pulling("oci://r.example/b:1")),
                },
            ],
            None,
        );
        let file = |t: &str| registry.problem_for(t).map(|p| p.file.to_string());
        assert_eq!(
            file("disk-check").as_deref(),
            Some("/plugins/disk-check.wasm")
        );
        assert_eq!(
            file("net-check").as_deref(),
            Some("configmap/ops/anything/net-check.wasm")
        );
        assert_eq!(file("check"), None);
        assert_eq!(file("disk"), None);
    }
}
