//! What a group does about its locks, decided from what the caches show: which to give back,
//! whether an older group goes first, which to take. No I/O, so first come, first served and
//! all or nothing are tested without a cluster; [`super::Locks::acquire`] carries it out.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::jiff::Timestamp;

use super::claim::{Claim, LockKind};

/// `(creation time, uid)` of a group: who came first.
pub type Arrival = (Option<Timestamp>, String);

/// Another group that waits for locks (its condition says so).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting {
    /// `<namespace>/<name>`.
    pub shown: String,
    pub arrival: Arrival,
    /// The Leases it waits for (those of its current wave).
    pub leases: BTreeSet<String>,
}

/// What a group does about its locks.
#[derive(Debug, PartialEq, Eq)]
pub struct LockPlan<'a> {
    /// Give back every lock it holds first: it holds some it no longer needs (an earlier
    /// wave's, or of changed targets or scope), and the cache still lists them for a moment.
    pub release_first: bool,
    pub next: LockMove<'a>,
}

/// The move after any release.
#[derive(Debug, PartialEq, Eq)]
pub enum LockMove<'a> {
    /// It holds every lock it needs, or needs none.
    Held,
    /// An older group waits for some of the same locks: it waits behind that one.
    WaitBehind {
        older: String,
        claims: Vec<&'a Claim>,
    },
    /// Take these, all or none: for each, the first of its Leases that can be had.
    Take(Vec<&'a Claim>),
}

/// Decides for a group (`me`, holding the Leases `held` as the cache says) that needs
/// `claims`. `waiting` lists the other groups waiting for locks; asked only when the group
/// must take some.
pub fn decide<'a>(
    claims: &'a [Claim],
    held: &BTreeSet<String>,
    me: &Arrival,
    waiting: impl FnOnce() -> Vec<Waiting>,
) -> LockPlan<'a> {
    let wanted: BTreeSet<&String> = claims.iter().flat_map(|c| &c.leases).collect();
    let release_first = held.iter().any(|l| !wanted.contains(l));
    let empty = BTreeSet::new();
    let held = if release_first { &empty } else { held };
    let holds = |c: &Claim| c.leases.iter().any(|l| held.contains(l));
    let missing: Vec<&Claim> = claims.iter().filter(|c| !holds(c)).collect();
    if missing.is_empty() {
        return LockPlan {
            release_first,
            next: LockMove::Held,
        };
    }
    // First come, first served: an older group waiting for one of these goes first.
    let mut before: BTreeMap<String, Vec<&Claim>> = BTreeMap::new();
    for other in waiting()
        .into_iter()
        .filter(|o| o.arrival < *me && o.arrival.1 != me.1)
    {
        for claim in claims {
            let names = claim.leases.iter().chain(&claim.covers);
            if names.into_iter().any(|l| other.leases.contains(l)) {
                before.entry(other.shown.clone()).or_default().push(claim);
            }
        }
    }
    let next = match before.into_iter().next() {
        Some((older, claims)) => LockMove::WaitBehind { older, claims },
        None => LockMove::Take(missing),
    };
    LockPlan {
        release_first,
        next,
    }
}

/// Why a group waits behind an `older` one for `claims`, whose Leases `holders` hold (none
/// when they are free).
pub fn waiting_behind(claims: &[&Claim], older: &str, mut holders: Vec<String>) -> String {
    holders.sort();
    holders.dedup();
    let (verb, it) = if claims.len() == 1 {
        ("is", "it")
    } else {
        ("are", "them")
    };
    let state = if holders.is_empty() {
        format!("{verb} free")
    } else {
        format!("{verb} held by group {}", holders.join(", "))
    };
    format!(
        "waiting: {} {state}, and group {older} came first and waits for {it} too",
        listed(claims),
    )
}

/// Why a group waits for the claims it could not take, by who holds them.
pub fn waiting_for_held(blocked: &BTreeMap<String, Vec<&Claim>>) -> String {
    let message = blocked
        .iter()
        .map(|(holders, claims)| {
            let verb = if claims.len() == 1 { "is" } else { "are" };
            format!("{} {verb} held by group {holders}", listed(claims))
        })
        .collect::<Vec<_>>()
        .join("; ");
    format!("waiting: {message}")
}

/// `target node-1 (…)`, `targets node-1 (…), node-2 (…) and 3 more`.
pub fn listed(claims: &[&Claim]) -> String {
    const SHOWN: usize = 5;
    if let Some(claim) = claims.first()
        && claim.kind == LockKind::Type
    {
        return claim.what.clone();
    }
    let names: Vec<&str> = claims.iter().take(SHOWN).map(|c| c.what.as_str()).collect();
    // A range stands for the targets it covers (its `what` names the first).
    let count = claims.iter().map(|c| c.covers.len().max(1)).sum::<usize>();
    let more = count - names.len();
    let s = if count == 1 { "" } else { "s" };
    let tail = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    format!("target{s} {}{tail}", names.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(lease: &str) -> Claim {
        Claim {
            leases: vec![lease.into()],
            what: format!("{lease} (10.0.0.1)"),
            key: format!("c/{lease}"),
            kind: LockKind::Target,
            covers: Vec::new(),
        }
    }

    fn at(second: i64, uid: &str) -> Arrival {
        (Timestamp::from_second(second).ok(), uid.into())
    }

    fn set(leases: &[&str]) -> BTreeSet<String> {
        leases.iter().map(|l| (*l).to_string()).collect()
    }

    fn waiting(shown: &str, arrival: Arrival, leases: &[&str]) -> Waiting {
        Waiting {
            shown: shown.into(),
            arrival,
            leases: set(leases),
        }
    }

    #[test]
    fn a_group_holding_every_lock_it_needs_asks_nobody() {
        let claims = [claim("a"), claim("b")];
        let plan = decide(&claims, &set(&["a", "b"]), &at(10, "me"), || {
            panic!("the waiting groups are not asked")
        });
        assert_eq!(
            plan,
            LockPlan {
                release_first: false,
                next: LockMove::Held
            }
        );
        let none = decide(&[], &BTreeSet::new(), &at(10, "me"), Vec::new);
        assert_eq!(none.next, LockMove::Held);
    }

    #[test]
    fn locks_of_an_earlier_wave_are_given_back_before_taking_the_next_waves() {
        let claims = [claim("c")];
        let plan = decide(&claims, &set(&["a", "c"]), &at(10, "me"), Vec::new);
        assert!(plan.release_first);
        // What it held of this wave went back with the rest: it takes it again.
        assert_eq!(plan.next, LockMove::Take(vec![&claims[0]]));
    }

    #[test]
    fn an_older_waiting_group_goes_first_and_a_younger_one_does_not() {
        let claims = [claim("a"), claim("b")];
        let older = || vec![waiting("ns/old", at(5, "old"), &["b", "x"])];
        let plan = decide(&claims, &set(&["a"]), &at(10, "me"), older);
        assert_eq!(
            plan.next,
            LockMove::WaitBehind {
                older: "ns/old".into(),
                claims: vec![&claims[1]]
            }
        );
        assert!(
            !plan.release_first,
            "it keeps what it holds while it waits in line"
        );

        let younger = || vec![waiting("ns/young", at(20, "young"), &["a", "b"])];
        let plan = decide(&claims, &set(&["a"]), &at(10, "me"), younger);
        assert_eq!(plan.next, LockMove::Take(vec![&claims[1]]));
        // An older group waiting for other locks is no reason to wait.
        let elsewhere = || vec![waiting("ns/old", at(5, "old"), &["z"])];
        let plan = decide(&claims, &BTreeSet::new(), &at(10, "me"), elsewhere);
        assert_eq!(plan.next, LockMove::Take(vec![&claims[0], &claims[1]]));
    }

    #[test]
    fn a_range_waits_behind_an_older_group_waiting_for_a_target_it_covers() {
        let range = Claim {
            leases: vec!["range-1".into()],
            what: "a (10.0.0.1)".into(),
            key: "c/a\nc/b".into(),
            kind: LockKind::Range,
            covers: vec!["a".into(), "b".into()],
        };
        let claims = [range];
        let older = || vec![waiting("ns/small", at(5, "small"), &["b"])];
        let plan = decide(&claims, &BTreeSet::new(), &at(10, "me"), older);
        assert_eq!(
            plan.next,
            LockMove::WaitBehind {
                older: "ns/small".into(),
                claims: vec![&claims[0]]
            }
        );
        // A target of the same range that it does not cover is no reason to wait.
        let elsewhere = || vec![waiting("ns/small", at(5, "small"), &["z"])];
        let plan = decide(&claims, &BTreeSet::new(), &at(10, "me"), elsewhere);
        assert_eq!(plan.next, LockMove::Take(vec![&claims[0]]));
    }

    #[test]
    fn the_messages_say_what_is_held_by_whom_and_who_came_first() {
        let claims = [claim("a"), claim("b")];
        let both: Vec<&Claim> = claims.iter().collect();
        assert_eq!(
            waiting_behind(&both[..1], "ns/old", Vec::new()),
            "waiting: target a (10.0.0.1) is free, and group ns/old came first and waits for it too"
        );
        assert_eq!(
            waiting_behind(&both, "ns/old", vec!["ns/h".into(), "ns/h".into()]),
            "waiting: targets a (10.0.0.1), b (10.0.0.1) are held by group ns/h, and group ns/old came first and waits for them too"
        );
        let blocked = BTreeMap::from([("ns/h".to_string(), both)]);
        assert_eq!(
            waiting_for_held(&blocked),
            "waiting: targets a (10.0.0.1), b (10.0.0.1) are held by group ns/h"
        );
    }
}
