//! What a group must hold to act, and who holds a lock.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::net::IpAddr;

use kube::ResourceExt;
use sha2::{Digest, Sha256};

use crate::api::{ExclusionScope, Target, WorkflowGroup};
use crate::names::lease_name;

/// What a lock Lease locks, as its [`super::LABEL_LOCK`] label says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockKind {
    /// One target (`spec.exclusion.scope: Target`).
    Target,
    /// One running slot of a group type (`spec.exclusion.scope: Type`).
    Type,
    /// The targets of a large group that fall in one range of its cluster's targets (see
    /// [`ranged`]).
    Range,
}

impl LockKind {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Target => "target",
            Self::Type => "type",
            Self::Range => "range",
        }
    }
}

/// One thing a group must hold to act: one of `leases` (a target has one; a group type's
/// limit has one per slot).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// The Lease names that satisfy it, any one of them.
    pub leases: Vec<String>,
    /// What it is, for people (`node-1 (192.168.1.101)`, `a slot of type cluster-expansion`).
    pub what: String,
    /// What the Lease's annotation says it locks: a target's key, a slot, or (a range's) the
    /// keys of the targets it covers, a line each.
    pub key: String,
    pub kind: LockKind,
    /// A range's: the Leases of the targets it covers. A group in line for one of them is in
    /// line for the range too.
    pub covers: Vec<String>,
}

/// A target's identity for locking: its cluster name and its address, normalised (an IPv6
/// address in its canonical form, an IPv4-mapped one as IPv4).
pub fn target_key(cluster_name: &str, ip: &str) -> String {
    let ip = ip.trim().parse::<IpAddr>().map_or_else(
        |_| ip.trim().to_ascii_lowercase(),
        |a| a.to_canonical().to_string(),
    );
    format!("{}/{ip}", cluster_name.trim())
}

/// What `group` must hold to act on `targets` (the targets of the Workflow it is about to
/// create: all of them, or one wave's).
pub fn claims(group: &WorkflowGroup, targets: &[Target]) -> Vec<Claim> {
    let exclusion = group.spec.exclusion.clone().unwrap_or_default();
    match exclusion.scope {
        ExclusionScope::None => Vec::new(),
        ExclusionScope::Target => {
            let keyed: BTreeMap<String, &Target> = targets
                .iter()
                .map(|t| (target_key(&group.spec.cluster_name, &t.ip), t))
                .collect();
            keyed
                .into_iter()
                .map(|(key, t)| Claim {
                    leases: vec![lease_name(LockKind::Target.as_str(), &key)],
                    what: format!("{} ({})", t.name, t.ip),
                    key,
                    kind: LockKind::Target,
                    covers: Vec::new(),
                })
                .collect()
        }
        ExclusionScope::Type => {
            let slots = exclusion.max_concurrent.unwrap_or(1).max(1);
            let type_ = group.spec.type_.trim();
            let key = format!("type {type_}");
            vec![Claim {
                leases: (0..slots)
                    .map(|i| lease_name(LockKind::Type.as_str(), &format!("{type_}/{i}")))
                    .collect(),
                what: format!("one of the {slots} running slots of group type {type_:?}"),
                key,
                kind: LockKind::Type,
                covers: Vec::new(),
            }]
        }
    }
}

/// How many ranges a cluster's targets are hashed into for [`ranged`] locks: a group takes at
/// most this many Leases however many targets it has.
pub const RANGES: usize = 256;

/// The range of a target (by its [`target_key`]).
fn range_of(key: &str) -> u8 {
    Sha256::digest(key.as_bytes())[0]
}

/// The claims of a large group, by range: its target claims (those of [`claims`]) grouped by
/// the range of their key, one claim (and one Lease, named by the cluster and the range) per
/// range. A range Lease lists the targets it locks, so it conflicts with a per-target Lease of
/// one of them (see `Locks::acquire`), while two ranged groups conflict on any range they
/// share: coarser between large groups, exact between a large group and the rest.
pub fn ranged(group: &WorkflowGroup, claims: &[Claim]) -> Vec<Claim> {
    let cluster = group.spec.cluster_name.trim();
    let mut by_range: BTreeMap<u8, Vec<&Claim>> = BTreeMap::new();
    for claim in claims.iter().filter(|c| c.kind == LockKind::Target) {
        by_range
            .entry(range_of(&claim.key))
            .or_default()
            .push(claim);
    }
    by_range
        .into_iter()
        .map(|(range, covered)| {
            Claim {
                leases: vec![lease_name(
                    LockKind::Range.as_str(),
                    &format!("{cluster}/{range}"),
                )],
                // Shown as its first target; `plan::listed` counts the rest.
                what: covered[0].what.clone(),
                key: covered
                    .iter()
                    .map(|c| c.key.as_str())
                    .collect::<Vec<_>>()
                    .join("\n"),
                kind: LockKind::Range,
                covers: covered.iter().flat_map(|c| c.leases.clone()).collect(),
            }
        })
        .collect()
}

/// The claims among `mine` (target claims) that a Lease locking `locked` (its annotation: keys,
/// a line each) locks too.
pub fn locked_by<'a>(mine: &'a [Claim], locked: &str) -> Vec<&'a Claim> {
    locked_in(&by_key(mine), locked)
}

/// The target claims among `mine`, by key (for [`locked_in`]).
pub fn by_key(mine: &[Claim]) -> HashMap<&str, &Claim> {
    mine.iter()
        .filter(|c| c.kind == LockKind::Target)
        .map(|c| (c.key.as_str(), c))
        .collect()
}

/// [`locked_by`] with the claims indexed by key once, for many Leases.
pub fn locked_in<'a>(mine: &HashMap<&str, &'a Claim>, locked: &str) -> Vec<&'a Claim> {
    locked
        .lines()
        .filter_map(|key| mine.get(key.trim()).copied())
        .collect()
}

/// The group holding a lock, as a Lease's `spec.holderIdentity` spells it:
/// `<namespace>/<name>/<uid>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HolderId {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl HolderId {
    /// `group` as a holder.
    pub fn of(group: &WorkflowGroup) -> Self {
        Self {
            namespace: group.namespace().unwrap_or_default(),
            name: group.name_any(),
            uid: group.uid().unwrap_or_default(),
        }
    }

    /// The holder a Lease names; `None` for a Lease without one (or not of ours).
    pub fn parse(identity: &str) -> Option<Self> {
        let mut parts = identity.splitn(3, '/');
        let (Some(namespace), Some(name), Some(uid)) = (parts.next(), parts.next(), parts.next())
        else {
            return None;
        };
        Some(Self {
            namespace: namespace.into(),
            name: name.into(),
            uid: uid.into(),
        })
    }

    /// `<namespace>/<name>`, as messages name the group.
    pub fn shown(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

impl fmt::Display for HolderId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.namespace, self.name, self.uid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_holder_reads_back_as_it_was_written_and_a_foreign_one_is_none() {
        let holder = HolderId {
            namespace: "ns".into(),
            name: "g".into(),
            uid: "u-1".into(),
        };
        assert_eq!(holder.to_string(), "ns/g/u-1");
        assert_eq!(HolderId::parse(&holder.to_string()), Some(holder.clone()));
        assert_eq!(holder.shown(), "ns/g");
        assert_eq!(HolderId::parse("an-operator-pod"), None);
    }
}
