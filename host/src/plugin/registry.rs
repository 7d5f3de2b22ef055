//! The set of workflow types the operator can run: every `*.wasm` its sources offer (a
//! directory watched for changes, ConfigMaps read through the API), reloaded when a source
//! changes. A source hands over file names and bytes; this module knows nothing of where they
//! came from.
//!
//! A ConfigMap volume changes by an atomic swap of its `..data` symlink, which shows up as
//! a mix of create/remove/rename events on names that are not the plugin files. So every
//! event only triggers a debounced rescan, and the rescan decides from content digests what
//! changed: never from the kind of an event.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::Duration;

use notify::{RecursiveMode, Watcher as _};
use serde::Serialize;
use sha2::{Digest as _, Sha256};

use super::error::PluginError;
use super::runtime::{Plugin, Runtime};

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
    /// The file it was loaded from (`configmap/<namespace>/<name>/<key>` for a ConfigMap entry).
    pub file: PathBuf,
}

/// One plugin file offered by a source: where it comes from and its bytes, or why they
/// could not be read.
#[derive(Debug, Clone)]
pub struct SourceFile {
    pub origin: PathBuf,
    pub bytes: Result<Vec<u8>, String>,
}

/// A file that could not be used, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadProblem {
    pub file: PathBuf,
    pub message: String,
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
}

#[derive(Default)]
struct State {
    /// What is served, by type.
    current: BTreeMap<String, Served>,
    /// Every good version seen since start, by digest.
    versions: HashMap<String, Arc<Plugin>>,
    /// The type each file last loaded successfully, to keep serving it while the file is broken.
    last_good_type: HashMap<PathBuf, String>,
    /// The last scan of each source, by source name; the served set follows their union.
    sources: BTreeMap<String, SourceScan>,
    problems: Vec<LoadProblem>,
    generation: u64,
}

#[derive(Clone, Default)]
struct SourceScan {
    loads: Vec<FileLoad>,
    problem: Option<LoadProblem>,
}

#[derive(Clone)]
struct Served {
    plugin: Arc<Plugin>,
    file: PathBuf,
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
        Self {
            inner: Arc::new(RegistryInner {
                runtime,
                state: Mutex::new(State::default()),
                scan_lock: Mutex::new(()),
                generation,
            }),
        }
    }

    /// The runtime plugins run in.
    pub fn runtime(&self) -> &Runtime {
        &self.inner.runtime
    }

    /// The current plugin of a workflow type.
    pub fn get(&self, type_name: &str) -> Option<Arc<Plugin>> {
        self.lock().current.get(type_name).map(|s| s.plugin.clone())
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

    /// A receiver of the generation number, bumped whenever the set of types or their
    /// digests changes.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.generation.subscribe()
    }

    /// Loads one file outside of any directory scan (for the CLI). The registry is unchanged.
    ///
    /// # Errors
    /// [`PluginError::Read`] when the file cannot be read, or any [`Runtime::load`] error.
    pub fn load_file(&self, path: &Path) -> Result<Arc<Plugin>, PluginError> {
        let origin = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|e| PluginError::Read {
            origin: origin.clone(),
            reason: e.to_string(),
        })?;
        self.inner.runtime.load(&bytes, &origin)
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
        // Compile outside the state lock: callers keep reading the old set meanwhile.
        let loads = files.into_iter().map(|file| self.load_one(file)).collect();
        let mut state = self.lock();
        state
            .sources
            .insert(source.to_string(), SourceScan { loads, problem });
        let before = served_digests(&state);
        let (loads, problems) = union_of_sources(&state);
        apply_scan(&mut state, loads, problems);
        let changed = served_digests(&state) != before;
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

    /// Scans `dir` now, then again whenever anything in it changes (debounced by 200 ms),
    /// until the returned guard is dropped.
    ///
    /// # Errors
    /// When the directory cannot be watched (for example, it does not exist).
    pub fn watch(&self, dir: &Path) -> anyhow::Result<WatchGuard> {
        let (tx, rx) = mpsc::channel::<()>();
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                if let Err(e) = &event {
                    tracing::warn!("plugin directory watch error: {e}; rescanning");
                }
                // Any event, of any kind, on any name: the rescan decides what changed.
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

    fn load_one(&self, file: SourceFile) -> FileLoad {
        let origin = file.origin.display().to_string();
        let result = file.bytes.and_then(|bytes| {
            let digest = hex::encode(Sha256::digest(&bytes));
            // Content loaded before: reuse the plugin as it is.
            if let Some(loaded) = self.lock().versions.get(&digest) {
                return Ok(loaded.clone());
            }
            self.inner
                .runtime
                .load(&bytes, &origin)
                .map_err(|e| e.to_string())
        });
        FileLoad {
            path: file.origin,
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

#[derive(Clone)]
struct FileLoad {
    path: PathBuf,
    result: Result<Arc<Plugin>, String>,
}

/// The `*.wasm` files of `dir` (following symlinks, skipping dotfiles and directories), sorted.
fn read_dir_files(dir: &Path) -> (Vec<SourceFile>, Option<LoadProblem>) {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => {
            let problem = LoadProblem {
                file: dir.to_path_buf(),
                message: format!("cannot read plugin directory {}: {e}", dir.display()),
            };
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
            bytes: std::fs::read(&path).map_err(|e| {
                PluginError::Read {
                    origin: path.display().to_string(),
                    reason: e.to_string(),
                }
                .to_string()
            }),
            origin: path,
        })
        .collect();
    (files, None)
}

/// Every source's files and problems, as one scan.
fn union_of_sources(state: &State) -> (Vec<FileLoad>, Vec<LoadProblem>) {
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

/// Makes the served set follow one scan's loads.
fn apply_scan(state: &mut State, loads: Vec<FileLoad>, mut problems: Vec<LoadProblem>) {
    let present: BTreeSet<PathBuf> = loads.iter().map(|l| l.path.clone()).collect();
    // Good loads, by the type they claim.
    let mut claims: BTreeMap<String, Vec<(PathBuf, Arc<Plugin>)>> = BTreeMap::new();
    // Types whose file is present but broken now: their last good version keeps serving.
    let mut broken_types: BTreeSet<String> = BTreeSet::new();
    for load in loads {
        match load.result {
            Ok(plugin) => {
                state
                    .versions
                    .insert(plugin.digest().to_string(), plugin.clone());
                state
                    .last_good_type
                    .insert(load.path.clone(), plugin.type_name().to_string());
                claims
                    .entry(plugin.type_name().to_string())
                    .or_default()
                    .push((load.path, plugin));
            }
            Err(mut message) => {
                if let Some(type_name) = state.last_good_type.get(&load.path) {
                    if state
                        .current
                        .get(type_name)
                        .is_some_and(|s| s.file == load.path)
                    {
                        message.push_str(&format!(
                            "; still serving the last good version of {type_name}"
                        ));
                    }
                    broken_types.insert(type_name.clone());
                }
                problems.push(LoadProblem {
                    file: load.path,
                    message,
                });
            }
        }
    }
    state
        .last_good_type
        .retain(|path, _| present.contains(path));

    let mut next: BTreeMap<String, Served> = BTreeMap::new();
    for (type_name, mut claimants) in claims {
        if claimants.len() == 1 {
            if let Some((file, plugin)) = claimants.pop() {
                next.insert(type_name, Served { plugin, file });
            }
            continue;
        }
        let files: Vec<String> = claimants
            .iter()
            .map(|(p, _)| p.display().to_string())
            .collect();
        // Keep the previous holder's version if it had one; never let a new claim win.
        let previous = state.current.get(&type_name).cloned();
        let outcome = match &previous {
            Some(served) => {
                let kept = served
                    .plugin
                    .digest()
                    .get(..12)
                    .unwrap_or_default()
                    .to_string();
                let from = served.file.display().to_string();
                next.insert(type_name.clone(), served.clone());
                format!("keeping the version already served ({kept}, from {from})")
            }
            None => format!("not serving {type_name} until only one file claims it"),
        };
        for (path, _) in claimants {
            problems.push(LoadProblem {
                file: path,
                message: format!(
                    "conflict: files {} all implement workflow type {type_name}; {outcome}",
                    files.join(", ")
                ),
            });
        }
    }
    for type_name in broken_types {
        if next.contains_key(&type_name) {
            continue;
        }
        if let Some(served) = state.current.get(&type_name)
            && present.contains(&served.file)
        {
            next.insert(type_name, served.clone());
        }
    }
    for problem in &problems {
        if !state.problems.contains(problem) {
            tracing::error!(file = %problem.file.display(), "cannot use plugin: {}", problem.message);
        }
    }
    state.problems = problems;
    state.current = next;
}

fn served_digests(state: &State) -> Vec<(String, String)> {
    state
        .current
        .iter()
        .map(|(t, s)| (t.clone(), s.plugin.digest().to_string()))
        .collect()
}

fn loaded_types(state: &State) -> Vec<LoadedType> {
    state
        .current
        .iter()
        .map(|(type_name, served)| LoadedType {
            type_name: type_name.clone(),
            version: served.plugin.info().version.clone(),
            digest: served.plugin.digest().to_string(),
            file: served.file.clone(),
        })
        .collect()
}
