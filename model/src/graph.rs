//! A workflow's steps as a validated dependency graph.
//!
//! Raw steps (from a plugin's `template` or from a Workflow applied by hand) become a
//! [`StepGraph`] before anything runs: names are unique Kubernetes-safe labels, every
//! dependency exists, and there is no cycle.

use std::collections::{BTreeMap, BTreeSet};

use crate::words::{self, WordError};

/// Why a set of steps is not a runnable graph.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GraphError {
    /// A workflow needs at least one step.
    #[error("the workflow has no steps")]
    Empty,
    /// Two steps share a name.
    #[error("step name {0:?} is used more than once")]
    DuplicateName(String),
    /// A step name Kubernetes cannot use in labels and pod names (not a DNS-1123 label).
    #[error("{0}")]
    InvalidName(#[from] WordError),
    /// A dependency names no step of the workflow.
    #[error("step {step:?} depends on {missing:?}, which is not a step of this workflow")]
    UnknownDependency { step: String, missing: String },
    /// A step depends on itself, directly or through others.
    #[error("steps form a dependency cycle: {}", .0.join(" -> "))]
    Cycle(Vec<String>),
}

/// Steps whose names and dependencies have been checked, in a topological order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepGraph {
    /// Step names in an order where every step comes after its dependencies (ties keep the
    /// order in which the steps were written).
    order: Vec<String>,
    deps: BTreeMap<String, Vec<String>>,
}

impl StepGraph {
    /// Builds the graph from `(name, depends_on)` pairs, in the order the steps were written.
    ///
    /// # Errors
    /// The first problem found, in this order: no steps, an invalid or duplicate name, an
    /// unknown dependency, a cycle.
    pub fn new<'a, I, D>(steps: I) -> Result<Self, GraphError>
    where
        I: IntoIterator<Item = (&'a str, D)>,
        D: IntoIterator<Item = &'a str>,
    {
        let mut written = Vec::new();
        let mut deps: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (i, (name, step_deps)) in steps.into_iter().enumerate() {
            words::dns_label(&format!("steps[{i}].name"), name)?;
            let step_deps: Vec<String> = step_deps.into_iter().map(str::to_string).collect();
            if deps.insert(name.to_string(), step_deps).is_some() {
                return Err(GraphError::DuplicateName(name.to_string()));
            }
            written.push(name.to_string());
        }
        if written.is_empty() {
            return Err(GraphError::Empty);
        }
        for name in &written {
            for dep in &deps[name] {
                if !deps.contains_key(dep) {
                    return Err(GraphError::UnknownDependency {
                        step: name.clone(),
                        missing: dep.clone(),
                    });
                }
            }
        }
        // Kahn's algorithm, taking the first ready step in written order each time: linear in
        // the number of dependencies however a plugin lists them.
        let index: BTreeMap<&str, usize> = written
            .iter()
            .enumerate()
            .map(|(i, name)| (name.as_str(), i))
            .collect();
        let mut waiting_on: Vec<usize> = written.iter().map(|name| deps[name].len()).collect();
        let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); written.len()];
        for (i, name) in written.iter().enumerate() {
            for dep in &deps[name] {
                if let Some(&d) = index.get(dep.as_str()) {
                    dependents[d].push(i);
                }
            }
        }
        let mut ready: BTreeSet<usize> =
            (0..written.len()).filter(|&i| waiting_on[i] == 0).collect();
        let mut done: BTreeSet<&str> = BTreeSet::new();
        let mut order = Vec::with_capacity(written.len());
        while let Some(i) = ready.pop_first() {
            done.insert(written[i].as_str());
            order.push(written[i].clone());
            for &dependent in &dependents[i] {
                waiting_on[dependent] -= 1;
                if waiting_on[dependent] == 0 {
                    ready.insert(dependent);
                }
            }
        }
        if order.len() < written.len() {
            return Err(GraphError::Cycle(find_cycle(&written, &deps, &done)));
        }
        Ok(Self { order, deps })
    }

    /// Step names, each after its dependencies.
    pub fn order(&self) -> &[String] {
        &self.order
    }

    /// The dependencies of `step` (empty for an unknown step).
    pub fn dependencies(&self, step: &str) -> &[String] {
        self.deps.get(step).map(Vec::as_slice).unwrap_or_default()
    }
}

/// A cycle among the steps not yet ordered, as a path that returns to its first step.
fn find_cycle(
    written: &[String],
    deps: &BTreeMap<String, Vec<String>>,
    done: &BTreeSet<&str>,
) -> Vec<String> {
    // Every remaining step has a remaining dependency, so walking dependencies must revisit a step.
    let Some(start) = written.iter().find(|n| !done.contains(n.as_str())) else {
        return Vec::new();
    };
    let mut path: Vec<String> = vec![start.clone()];
    loop {
        let current = &path[path.len() - 1];
        let Some(next) = deps[current].iter().find(|d| !done.contains(d.as_str())) else {
            return path;
        };
        if let Some(pos) = path.iter().position(|p| p == next) {
            let mut cycle = path[pos..].to_vec();
            cycle.push(next.clone());
            return cycle;
        }
        path.push(next.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph<'a>(steps: &[(&'a str, &[&'a str])]) -> Result<StepGraph, GraphError> {
        StepGraph::new(steps.iter().map(|(n, d)| (*n, d.iter().copied())))
    }

    #[test]
    fn dependencies_come_before_dependents_and_ties_keep_written_order() {
        let g = graph(&[("c", &["a", "b"]), ("a", &[]), ("b", &["a"]), ("d", &[])]).unwrap();
        assert_eq!(g.order(), ["a", "b", "c", "d"]);
        assert_eq!(g.dependencies("c"), ["a", "b"]);
    }

    #[test]
    fn a_cycle_is_named_step_by_step() {
        let err = graph(&[("a", &["c"]), ("b", &["a"]), ("c", &["b"])]).unwrap_err();
        assert_eq!(
            err,
            GraphError::Cycle(vec!["a".into(), "c".into(), "b".into(), "a".into()])
        );
        assert_eq!(
            err.to_string(),
            "steps form a dependency cycle: a -> c -> b -> a"
        );
    }

    #[test]
    fn a_self_dependency_is_a_cycle() {
        let err = graph(&[("a", &["a"])]).unwrap_err();
        assert_eq!(err, GraphError::Cycle(vec!["a".into(), "a".into()]));
    }

    #[test]
    fn unknown_dependency_and_duplicates_are_rejected() {
        assert_eq!(
            graph(&[("a", &["x"])]).unwrap_err(),
            GraphError::UnknownDependency {
                step: "a".into(),
                missing: "x".into()
            }
        );
        assert_eq!(
            graph(&[("a", &[]), ("a", &[])]).unwrap_err(),
            GraphError::DuplicateName("a".into())
        );
        assert_eq!(graph(&[]).unwrap_err(), GraphError::Empty);
    }

    #[test]
    fn a_step_name_kubernetes_cannot_use_is_refused_naming_the_step_and_the_rule() {
        let too_long = "x".repeat(64);
        for bad in ["Check", "a_b", "-a", "a-", "", too_long.as_str()] {
            let Err(GraphError::InvalidName(e)) = graph(&[("ok", &[]), (bad, &[])]) else {
                panic!("{bad:?} should be refused");
            };
            assert_eq!(e.field, "steps[1].name", "{bad:?}");
        }
        let err = graph(&[("Check", &[])]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "steps[0].name: \"Check\" is not a valid DNS-1123 label: only lowercase letters, \
             digits and '-' are allowed"
        );
        assert!(graph(&[("check-network-2", &[])]).is_ok());
    }

    #[test]
    fn ordering_many_repeated_dependencies_takes_linear_time() {
        // What a plugin can return within its output bound: 256 steps written last-first, each
        // listing the last step a thousand times before the step it waits for. Scanning every
        // waiting step for a ready one took a minute on this (unoptimised); now well under 5 s.
        let names: Vec<String> = (0..256).map(|i| format!("s{i}")).collect();
        let steps: Vec<(&str, Vec<&str>)> = (0..256)
            .map(|i| {
                let mut deps = vec!["s255"; if i == 255 { 0 } else { 1000 }];
                if i < 254 {
                    deps.push(names[i + 1].as_str());
                }
                (names[i].as_str(), deps)
            })
            .collect();
        let started = std::time::Instant::now();
        let graph =
            StepGraph::new(steps.iter().map(|(n, d)| (*n, d.iter().copied()))).expect("a chain");
        assert_eq!(graph.order().first().map(String::as_str), Some("s255"));
        assert_eq!(graph.order().last().map(String::as_str), Some("s0"));
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "took {:?}",
            started.elapsed()
        );
    }
}
