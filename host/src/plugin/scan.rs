//! What one scan of the plugin sources decides: which file serves each workflow type, and
//! which files cannot be used and why.
//!
//! [`decide`] is a pure function of what was served before and what each file offers now, so
//! every rule is tested with plain values, without compiling any WebAssembly. The registry
//! loads the files, calls it, and stores its answer.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::Arc;

use serde::{Serialize, Serializer};

use super::error::PluginError;
use super::error::short_digest;
use super::origin::Origin;
use super::runtime::Plugin;

/// What a scan needs to know of a loaded plugin.
pub(super) trait Candidate: Clone {
    /// The workflow type it implements.
    fn type_name(&self) -> &str;
    /// Its content digest.
    fn digest(&self) -> &str;
}

impl Candidate for Arc<Plugin> {
    fn type_name(&self) -> &str {
        Plugin::type_name(self)
    }

    fn digest(&self) -> &str {
        Plugin::digest(self)
    }
}

/// What one file offered in a scan: a plugin, or why it could not be read or loaded.
#[derive(Debug, Clone)]
pub(super) struct Offer<P> {
    pub origin: Origin,
    pub result: Result<P, PluginError>,
}

/// The version of a type being served, and the file it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Served<P> {
    pub plugin: P,
    pub origin: Origin,
}

/// What a scan decides, and what the next scan starts from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Serving<P> {
    /// What is served, by type.
    pub current: BTreeMap<String, Served<P>>,
    /// The type each file last loaded successfully, to keep serving it while the file is broken.
    pub last_good_type: HashMap<Origin, String>,
}

impl<P> Default for Serving<P> {
    fn default() -> Self {
        Self {
            current: BTreeMap::new(),
            last_good_type: HashMap::new(),
        }
    }
}

/// The outcome of [`decide`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Decision<P> {
    pub serving: Serving<P>,
    /// Every file that cannot be used: the sources' own problems first, then the files'.
    pub problems: Vec<LoadProblem>,
    /// Whether the set of served types or their digests changed.
    pub changed: bool,
}

/// A file that could not be used, and why.
///
/// Serialized as `{"file": <origin>, "message": <why, as a person reads it>}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadProblem {
    pub file: Origin,
    #[serde(rename = "message", serialize_with = "as_text")]
    pub kind: ProblemKind,
}

impl LoadProblem {
    /// A file (or a source) that could not be read or loaded.
    pub fn failed(file: Origin, error: PluginError) -> Self {
        Self {
            file,
            kind: ProblemKind::Failed {
                error,
                still_serving: None,
            },
        }
    }

    /// What went wrong, as a person reads it.
    pub fn message(&self) -> String {
        self.kind.to_string()
    }
}

/// Why a file is not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProblemKind {
    /// It could not be read or loaded. `still_serving` names the type that this file served
    /// before and whose last good version it still serves.
    Failed {
        error: PluginError,
        still_serving: Option<String>,
    },
    /// Several files implement `type_name`. `kept` is the version served before the conflict,
    /// which keeps serving; with none, the type is not served until only one file claims it.
    Conflict {
        type_name: String,
        files: Vec<Origin>,
        kept: Option<KeptVersion>,
    },
}

/// The version of a type kept during a conflict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptVersion {
    pub digest: String,
    pub origin: Origin,
}

impl fmt::Display for ProblemKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProblemKind::Failed {
                error,
                still_serving: None,
            } => write!(f, "{error}"),
            ProblemKind::Failed {
                error,
                still_serving: Some(type_name),
            } => write!(
                f,
                "{error}; still serving the last good version of {type_name}"
            ),
            ProblemKind::Conflict {
                type_name,
                files,
                kept,
            } => {
                let files: Vec<String> = files.iter().map(ToString::to_string).collect();
                write!(
                    f,
                    "conflict: files {} all implement workflow type {type_name}; ",
                    files.join(", ")
                )?;
                match kept {
                    Some(kept) => write!(
                        f,
                        "keeping the version already served ({}, from {})",
                        short_digest(&kept.digest),
                        kept.origin
                    ),
                    None => write!(f, "not serving {type_name} until only one file claims it"),
                }
            }
        }
    }
}

fn as_text<S: Serializer>(value: &impl fmt::Display, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(value)
}

/// Decides what is served after a scan in which the files offered `offers` (every source's,
/// in order) and the sources themselves reported `source_problems`.
///
/// # Guarantees
/// - A file that offers a type no other file claims serves it.
/// - A file that is broken now keeps serving the last good version of the type it served,
///   as long as it is present; its problem says so.
/// - Two files claiming one type never silently replace the current holder: the version
///   served before keeps serving (even from a file now gone), or with none the type is not
///   served; every claimant's problem names the conflict.
/// - A file no longer offered stops serving, and its last good type is forgotten.
pub(super) fn decide<P: Candidate>(
    previous: &Serving<P>,
    offers: Vec<Offer<P>>,
    source_problems: Vec<LoadProblem>,
) -> Decision<P> {
    let present: BTreeSet<Origin> = offers.iter().map(|o| o.origin.clone()).collect();
    let mut last_good_type = previous.last_good_type.clone();
    let mut problems = source_problems;
    // Good offers, by the type they claim.
    let mut claims: BTreeMap<String, Vec<Served<P>>> = BTreeMap::new();
    // Types whose file is present but broken now: their last good version may keep serving.
    let mut broken_types: BTreeSet<String> = BTreeSet::new();
    for offer in offers {
        match offer.result {
            Ok(plugin) => {
                last_good_type.insert(offer.origin.clone(), plugin.type_name().to_string());
                claims
                    .entry(plugin.type_name().to_string())
                    .or_default()
                    .push(Served {
                        plugin,
                        origin: offer.origin,
                    });
            }
            Err(error) => {
                let last_good = last_good_type.get(&offer.origin);
                let still_serving = last_good
                    .filter(|type_name| {
                        previous
                            .current
                            .get(*type_name)
                            .is_some_and(|served| served.origin == offer.origin)
                    })
                    .cloned();
                broken_types.extend(last_good.cloned());
                problems.push(LoadProblem {
                    file: offer.origin,
                    kind: ProblemKind::Failed {
                        error,
                        still_serving,
                    },
                });
            }
        }
    }
    last_good_type.retain(|origin, _| present.contains(origin));

    let mut current = BTreeMap::new();
    for (type_name, claimants) in claims {
        let (served, mut conflicts) =
            settle_claims(&type_name, previous.current.get(&type_name), claimants);
        current.extend(served.map(|served| (type_name, served)));
        problems.append(&mut conflicts);
    }
    for type_name in broken_types {
        if current.contains_key(&type_name) {
            continue;
        }
        if let Some(served) = keep_last_good(previous.current.get(&type_name), &present) {
            current.insert(type_name, served);
        }
    }
    let changed = digests(&previous.current) != digests(&current);
    Decision {
        serving: Serving {
            current,
            last_good_type,
        },
        problems,
        changed,
    }
}

/// Who serves `type_name` when `claimants` (at least one) offer it and `previous` served it
/// before the scan, and the conflict each claimant is told about when there are several.
fn settle_claims<P: Candidate>(
    type_name: &str,
    previous: Option<&Served<P>>,
    mut claimants: Vec<Served<P>>,
) -> (Option<Served<P>>, Vec<LoadProblem>) {
    if claimants.len() == 1 {
        return (claimants.pop(), Vec::new());
    }
    let files: Vec<Origin> = claimants.iter().map(|c| c.origin.clone()).collect();
    // Never let a new claim win: the previous holder's version keeps serving if there is one.
    let kept = previous.map(|served| KeptVersion {
        digest: served.plugin.digest().to_string(),
        origin: served.origin.clone(),
    });
    let problems = claimants
        .into_iter()
        .map(|claimant| LoadProblem {
            file: claimant.origin,
            kind: ProblemKind::Conflict {
                type_name: type_name.to_string(),
                files: files.clone(),
                kept: kept.clone(),
            },
        })
        .collect();
    (previous.cloned(), problems)
}

/// The version of a type whose file is broken now that keeps serving: the one served before,
/// if its file is still offered.
fn keep_last_good<P: Clone>(
    previous: Option<&Served<P>>,
    present: &BTreeSet<Origin>,
) -> Option<Served<P>> {
    previous
        .filter(|served| present.contains(&served.origin))
        .cloned()
}

/// The served types and their digests, to tell whether a scan changed anything.
fn digests<P: Candidate>(current: &BTreeMap<String, Served<P>>) -> Vec<(&str, &str)> {
    current
        .iter()
        .map(|(type_name, served)| (type_name.as_str(), served.plugin.digest()))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    /// A plugin as a scan sees it: a type and a digest.
    #[derive(Debug, Clone, PartialEq, Eq)]
    struct Fake {
        type_name: &'static str,
        digest: String,
    }

    impl Candidate for Fake {
        fn type_name(&self) -> &str {
            self.type_name
        }

        fn digest(&self) -> &str {
            &self.digest
        }
    }

    /// A plugin of `type_name` whose digest starts with `tag` (64 hex digits, as a sha256).
    fn fake(type_name: &'static str, tag: &str) -> Fake {
        Fake {
            type_name,
            digest: format!("{tag:0<64}"),
        }
    }

    fn file(name: &str) -> Origin {
        Origin::File(PathBuf::from(format!("/plugins/{name}")))
    }

    fn good(name: &str, plugin: Fake) -> Offer<Fake> {
        Offer {
            origin: file(name),
            result: Ok(plugin),
        }
    }

    fn broken(name: &str) -> Offer<Fake> {
        Offer {
            origin: file(name),
            result: Err(not_a_component(name)),
        }
    }

    fn not_a_component(name: &str) -> PluginError {
        PluginError::NotAComponent {
            origin: file(name).to_string(),
            reason: "bad magic".into(),
        }
    }

    /// The state after a scan of `offers` from nothing.
    fn after(offers: Vec<Offer<Fake>>) -> Serving<Fake> {
        decide(&Serving::default(), offers, Vec::new()).serving
    }

    /// What is served: type, file, and the first two digits of its digest.
    fn served(serving: &Serving<Fake>) -> Vec<(&str, String, &str)> {
        serving
            .current
            .iter()
            .map(|(t, s)| (t.as_str(), s.origin.to_string(), &s.plugin.digest[..2]))
            .collect()
    }

    #[test]
    fn a_new_type_is_served_from_its_file_and_the_scan_is_a_change() {
        let decision = decide(
            &Serving::default(),
            vec![
                good("at.wasm", fake("at", "a1")),
                good("setup.wasm", fake("setup", "b1")),
            ],
            Vec::new(),
        );
        assert_eq!(
            served(&decision.serving),
            [
                ("at", "/plugins/at.wasm".into(), "a1"),
                ("setup", "/plugins/setup.wasm".into(), "b1")
            ]
        );
        assert!(decision.changed);
        assert!(decision.problems.is_empty(), "{:?}", decision.problems);
        assert_eq!(
            decision
                .serving
                .last_good_type
                .get(&file("at.wasm"))
                .map(String::as_str),
            Some("at")
        );
    }

    #[test]
    fn an_unchanged_scan_is_not_a_change() {
        let offers = || vec![good("at.wasm", fake("at", "a1"))];
        let before = after(offers());
        let decision = decide(&before, offers(), Vec::new());
        assert!(!decision.changed);
        assert_eq!(decision.serving, before);
    }

    #[test]
    fn a_new_version_in_the_same_file_replaces_the_old_and_is_a_change() {
        let before = after(vec![good("at.wasm", fake("at", "a1"))]);
        let decision = decide(&before, vec![good("at.wasm", fake("at", "a2"))], Vec::new());
        assert_eq!(
            served(&decision.serving),
            [("at", "/plugins/at.wasm".into(), "a2")]
        );
        assert!(decision.changed);
    }

    #[test]
    fn the_same_version_moved_to_another_file_is_served_from_there_but_is_not_a_change() {
        let before = after(vec![good("at.wasm", fake("at", "a1"))]);
        let decision = decide(
            &before,
            vec![good("at-v1.wasm", fake("at", "a1"))],
            Vec::new(),
        );
        assert_eq!(
            served(&decision.serving),
            [("at", "/plugins/at-v1.wasm".into(), "a1")]
        );
        assert!(
            !decision.changed,
            "the set of types and digests is the same"
        );
    }

    #[test]
    fn a_broken_file_keeps_its_last_good_version_served_and_reports_the_problem() {
        let before = after(vec![good("at.wasm", fake("at", "a1"))]);
        let decision = decide(&before, vec![broken("at.wasm")], Vec::new());
        assert_eq!(
            served(&decision.serving),
            [("at", "/plugins/at.wasm".into(), "a1")]
        );
        assert!(!decision.changed);
        assert_eq!(
            decision.problems,
            [LoadProblem {
                file: file("at.wasm"),
                kind: ProblemKind::Failed {
                    error: not_a_component("at.wasm"),
                    still_serving: Some("at".into()),
                },
            }]
        );
        assert_eq!(
            decision.problems[0].message(),
            "/plugins/at.wasm is not a WebAssembly component: bad magic; \
             still serving the last good version of at"
        );
        // Still known as the file of `at`, so a second broken scan keeps serving it too.
        let again = decide(&decision.serving, vec![broken("at.wasm")], Vec::new());
        assert_eq!(again.serving, decision.serving);
        assert_eq!(again.problems, decision.problems);
    }

    #[test]
    fn a_broken_file_that_never_loaded_serves_nothing_and_is_reported_without_a_last_good_version()
    {
        let decision = decide(&Serving::default(), vec![broken("at.wasm")], Vec::new());
        assert!(decision.serving.current.is_empty());
        assert!(decision.serving.last_good_type.is_empty());
        assert!(!decision.changed);
        assert_eq!(
            decision.problems,
            [LoadProblem::failed(
                file("at.wasm"),
                not_a_component("at.wasm")
            )]
        );
        assert_eq!(
            decision.problems[0].message(),
            "/plugins/at.wasm is not a WebAssembly component: bad magic"
        );
    }

    #[test]
    fn a_broken_file_whose_type_another_file_serves_does_not_claim_to_serve_it() {
        // b.wasm loaded `at` once but lost a conflict to a.wasm, which kept serving.
        let before = Serving {
            current: BTreeMap::from([(
                "at".to_string(),
                Served {
                    plugin: fake("at", "a1"),
                    origin: file("a.wasm"),
                },
            )]),
            last_good_type: HashMap::from([
                (file("a.wasm"), "at".to_string()),
                (file("b.wasm"), "at".to_string()),
            ]),
        };
        let decision = decide(
            &before,
            vec![good("a.wasm", fake("at", "a1")), broken("b.wasm")],
            Vec::new(),
        );
        assert_eq!(
            served(&decision.serving),
            [("at", "/plugins/a.wasm".into(), "a1")]
        );
        assert_eq!(
            decision.problems,
            [LoadProblem::failed(
                file("b.wasm"),
                not_a_component("b.wasm")
            )]
        );
    }

    #[test]
    fn a_broken_file_does_not_keep_a_version_whose_file_is_gone() {
        // a.wasm served `at`; b.wasm once loaded `at` too. Now a.wasm is gone and b.wasm broken.
        let before = Serving {
            current: BTreeMap::from([(
                "at".to_string(),
                Served {
                    plugin: fake("at", "a1"),
                    origin: file("a.wasm"),
                },
            )]),
            last_good_type: HashMap::from([
                (file("a.wasm"), "at".to_string()),
                (file("b.wasm"), "at".to_string()),
            ]),
        };
        let decision = decide(&before, vec![broken("b.wasm")], Vec::new());
        assert!(decision.serving.current.is_empty());
        assert!(decision.changed);
        assert_eq!(
            decision.serving.last_good_type,
            HashMap::from([(file("b.wasm"), "at".to_string())])
        );
    }

    #[test]
    fn a_fixed_file_serves_its_new_version_and_its_problem_is_gone() {
        let before = after(vec![good("at.wasm", fake("at", "a1"))]);
        let broken_scan = decide(&before, vec![broken("at.wasm")], Vec::new());
        let fixed = decide(
            &broken_scan.serving,
            vec![good("at.wasm", fake("at", "a2"))],
            Vec::new(),
        );
        assert_eq!(
            served(&fixed.serving),
            [("at", "/plugins/at.wasm".into(), "a2")]
        );
        assert!(fixed.changed);
        assert!(fixed.problems.is_empty(), "{:?}", fixed.problems);
    }

    #[test]
    fn two_files_claiming_a_new_type_serve_neither_and_both_report_the_conflict() {
        let decision = decide(
            &Serving::default(),
            vec![
                good("a.wasm", fake("at", "a1")),
                good("b.wasm", fake("at", "b1")),
            ],
            Vec::new(),
        );
        assert!(decision.serving.current.is_empty());
        assert!(!decision.changed);
        let conflict = ProblemKind::Conflict {
            type_name: "at".into(),
            files: vec![file("a.wasm"), file("b.wasm")],
            kept: None,
        };
        assert_eq!(
            decision.problems,
            [
                LoadProblem {
                    file: file("a.wasm"),
                    kind: conflict.clone()
                },
                LoadProblem {
                    file: file("b.wasm"),
                    kind: conflict
                },
            ]
        );
        assert_eq!(
            decision.problems[0].message(),
            "conflict: files /plugins/a.wasm, /plugins/b.wasm all implement workflow type at; \
             not serving at until only one file claims it"
        );
        // Both loaded, so each keeps serving `at` later if it breaks while it is the holder.
        assert_eq!(decision.serving.last_good_type.len(), 2);
    }

    #[test]
    fn a_second_file_claiming_a_served_type_never_replaces_the_holder_and_is_reported() {
        let before = after(vec![good("at.wasm", fake("at", "a1"))]);
        let decision = decide(
            &before,
            vec![
                good("at.wasm", fake("at", "a1")),
                good("copy.wasm", fake("at", "c1")),
            ],
            Vec::new(),
        );
        assert_eq!(
            served(&decision.serving),
            [("at", "/plugins/at.wasm".into(), "a1")]
        );
        assert!(!decision.changed);
        assert_eq!(decision.problems.len(), 2, "{:?}", decision.problems);
        assert_eq!(
            decision.problems[1].message(),
            format!(
                "conflict: files /plugins/at.wasm, /plugins/copy.wasm all implement workflow \
                 type at; keeping the version already served (a1{}, from /plugins/at.wasm)",
                "0".repeat(10)
            )
        );
        // Resolving the conflict serves the one file left, with no problem.
        let resolved = decide(
            &decision.serving,
            vec![good("copy.wasm", fake("at", "c1"))],
            Vec::new(),
        );
        assert_eq!(
            served(&resolved.serving),
            [("at", "/plugins/copy.wasm".into(), "c1")]
        );
        assert!(resolved.changed);
        assert!(resolved.problems.is_empty());
    }

    #[test]
    fn during_a_conflict_the_holder_keeps_its_version_even_when_its_file_changed_or_is_gone() {
        let before = after(vec![good("at.wasm", fake("at", "a1"))]);
        let decision = decide(
            &before,
            vec![
                good("b.wasm", fake("at", "b1")),
                good("c.wasm", fake("at", "c1")),
            ],
            Vec::new(),
        );
        assert_eq!(
            served(&decision.serving),
            [("at", "/plugins/at.wasm".into(), "a1")]
        );
        assert!(!decision.changed);
        assert!(
            decision
                .problems
                .iter()
                .all(|p| matches!(&p.kind, ProblemKind::Conflict { kept: Some(k), .. } if k.origin == file("at.wasm")))
        );
        assert!(
            !decision
                .serving
                .last_good_type
                .contains_key(&file("at.wasm")),
            "a file gone is forgotten"
        );

        // The holder's file offers a new version beside another claimant: still the old one.
        let decision = decide(
            &before,
            vec![
                good("at.wasm", fake("at", "a2")),
                good("copy.wasm", fake("at", "c1")),
            ],
            Vec::new(),
        );
        assert_eq!(
            served(&decision.serving),
            [("at", "/plugins/at.wasm".into(), "a1")]
        );
        assert!(!decision.changed);
    }

    #[test]
    fn a_conflict_wins_over_a_broken_file_of_the_same_type() {
        // The holder's file is broken and two others claim its type: the conflict decides,
        // keeping the holder's version.
        let before = after(vec![good("at.wasm", fake("at", "a1"))]);
        let decision = decide(
            &before,
            vec![
                broken("at.wasm"),
                good("b.wasm", fake("at", "b1")),
                good("c.wasm", fake("at", "c1")),
            ],
            Vec::new(),
        );
        assert_eq!(
            served(&decision.serving),
            [("at", "/plugins/at.wasm".into(), "a1")]
        );
        assert_eq!(decision.problems.len(), 3, "{:?}", decision.problems);
        assert!(decision.problems[0].message().contains("still serving"));
    }

    #[test]
    fn one_good_file_claiming_the_type_of_a_broken_holder_replaces_it() {
        let before = after(vec![good("a.wasm", fake("at", "a1"))]);
        let decision = decide(
            &before,
            vec![broken("a.wasm"), good("b.wasm", fake("at", "b1"))],
            Vec::new(),
        );
        assert_eq!(
            served(&decision.serving),
            [("at", "/plugins/b.wasm".into(), "b1")]
        );
        assert!(decision.changed);
        assert_eq!(decision.problems.len(), 1);
    }

    #[test]
    fn a_removed_file_stops_serving_its_type_and_is_forgotten() {
        let before = after(vec![
            good("at.wasm", fake("at", "a1")),
            good("setup.wasm", fake("setup", "b1")),
        ]);
        let decision = decide(
            &before,
            vec![good("setup.wasm", fake("setup", "b1"))],
            Vec::new(),
        );
        assert_eq!(
            served(&decision.serving),
            [("setup", "/plugins/setup.wasm".into(), "b1")]
        );
        assert!(decision.changed);
        assert!(decision.problems.is_empty());
        assert_eq!(
            decision.serving.last_good_type,
            HashMap::from([(file("setup.wasm"), "setup".to_string())])
        );
        // Back later but broken: nothing to keep serving.
        let back = decide(
            &decision.serving,
            vec![broken("at.wasm"), good("setup.wasm", fake("setup", "b1"))],
            Vec::new(),
        );
        assert_eq!(
            served(&back.serving),
            [("setup", "/plugins/setup.wasm".into(), "b1")]
        );
        assert_eq!(
            back.problems,
            [LoadProblem::failed(
                file("at.wasm"),
                not_a_component("at.wasm")
            )]
        );
    }

    #[test]
    fn a_file_that_now_offers_another_type_stops_serving_the_old_one() {
        let before = after(vec![good("x.wasm", fake("at", "a1"))]);
        let decision = decide(
            &before,
            vec![good("x.wasm", fake("setup", "b1"))],
            Vec::new(),
        );
        assert_eq!(
            served(&decision.serving),
            [("setup", "/plugins/x.wasm".into(), "b1")]
        );
        assert!(decision.changed);
    }

    #[test]
    fn the_sources_own_problems_come_first_and_serve_nothing() {
        let unreadable = LoadProblem::failed(
            Origin::File(PathBuf::from("/plugins")),
            PluginError::ReadDir {
                dir: "/plugins".into(),
                source: std::io::Error::from(std::io::ErrorKind::NotFound).into(),
            },
        );
        let decision = decide(
            &Serving::default(),
            vec![broken("at.wasm")],
            vec![unreadable.clone()],
        );
        assert_eq!(decision.problems.len(), 2);
        assert_eq!(decision.problems[0], unreadable);
        assert!(
            decision.problems[0]
                .message()
                .starts_with("cannot read plugin directory /plugins: "),
            "{:?}",
            decision.problems[0]
        );
    }

    #[test]
    fn a_problem_serializes_as_its_file_and_its_message() {
        let problem = LoadProblem {
            file: Origin::ConfigMap {
                namespace: "ops".into(),
                name: "at".into(),
                key: "at.wasm".into(),
            },
            kind: ProblemKind::Failed {
                error: PluginError::NotBinaryData {
                    key: "at.wasm".into(),
                },
                still_serving: Some("at".into()),
            },
        };
        assert_eq!(
            serde_json::to_value(&problem).expect("serialize"),
            serde_json::json!({
                "file": "configmap/ops/at/at.wasm",
                "message": problem.message(),
            })
        );
    }
}
