//! Approvals of steps: which count ([`judge`], pure) and where the controllers find them (the
//! watch cache, and whether the approval policy is in force, asked of the API server).

pub mod judge;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use kube::api::Api;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};

use self::judge::{Given, POLICY, Trust, trust_of};
use crate::api::{Approval, Workflow, run_of};

/// How long what the API server said of the approval policy is believed.
const TRUST_TTL: Duration = Duration::from_secs(5);

/// The Approvals the operator watches, and whether they can be trusted.
pub struct Approvals {
    client: Client,
    store: Store<Approval>,
    /// The names of the Approvals of each Workflow (namespace, name), as the watch delivered
    /// them: a Workflow's are found by key, not by scanning every Approval. An Approval's
    /// `spec.workflow` never changes; one deleted is dropped when next looked up.
    by_workflow: Mutex<HashMap<(String, String), BTreeSet<String>>>,
    /// Whether the approval policy is in force, when last asked.
    trust: Mutex<Option<(Instant, Trust)>>,
    /// When this process last found the policy not in force (Unix seconds): Approvals made
    /// until then never count, whatever the API server's record of the last change says.
    last_untrusted: Mutex<Option<i64>>,
}

impl Approvals {
    pub fn new(client: Client, store: Store<Approval>) -> Self {
        Self {
            client,
            store,
            by_workflow: Mutex::default(),
            trust: Mutex::default(),
            last_untrusted: Mutex::default(),
        }
    }

    /// Notes an Approval the watch delivered.
    pub fn saw(&self, approval: &Approval) {
        let key = (
            approval.namespace().unwrap_or_default(),
            approval.spec.workflow.clone(),
        );
        self.by_workflow
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(key)
            .or_default()
            .insert(approval.name_any());
    }

    /// Whether Approvals can be trusted now, and since when: the approval policy as the API
    /// server has it, asked again after [`TRUST_TTL`].
    pub async fn trust(&self) -> Trust {
        let cached = self
            .trust
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some((_, trust)) = cached.filter(|(at, _)| at.elapsed() < TRUST_TTL) {
            return trust;
        }
        let policies: Api<ValidatingAdmissionPolicy> = Api::all(self.client.clone());
        let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(self.client.clone());
        let trust = match (
            policies.get_opt(POLICY).await,
            bindings.get_opt(POLICY).await,
        ) {
            (Ok(policy), Ok(binding)) => self.remember(trust_of(policy.as_ref(), binding.as_ref())),
            // A read error says nothing of the policy.
            (Err(e), _) | (_, Err(e)) => {
                Err(format!("cannot read the admission policy {POLICY}: {e}"))
            }
        };
        *self.trust.lock().unwrap_or_else(PoisonError::into_inner) =
            Some((Instant::now(), trust.clone()));
        trust
    }

    /// `trust` as this process has seen the policy: not before the last time it found it not in
    /// force, whatever the API server's record of the last change says.
    fn remember(&self, trust: Trust) -> Trust {
        let mut last = self
            .last_untrusted
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match trust {
            Ok(since) => Ok(last.map_or(since, |bad| since.max(bad.saturating_add(1)))),
            Err(why) => {
                *last = Some(k8s_openapi::jiff::Timestamp::now().as_second());
                Err(why)
            }
        }
    }

    /// The Approvals of `workflow`'s steps in its current run, by step, from the cache.
    pub fn of_workflow(&self, workflow: &Workflow) -> BTreeMap<String, Vec<Given>> {
        let ns = workflow.namespace().unwrap_or_default();
        let (name, run) = (workflow.name_any(), run_of(workflow));
        let mut index = self
            .by_workflow
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let Some(names) = index.get_mut(&(ns.clone(), name.clone())) else {
            return BTreeMap::new();
        };
        let mut by_step: BTreeMap<String, Vec<Given>> = BTreeMap::new();
        names.retain(|approval| {
            let Some(a) = self.store.get(&ObjectRef::new(approval).within(&ns)) else {
                return false;
            };
            if a.spec.workflow == name && a.spec.run == run {
                by_step
                    .entry(a.spec.step.clone())
                    .or_default()
                    .push(Given::of(&a));
            }
            true
        });
        for given in by_step.values_mut() {
            given.sort_by(|a, b| a.name.cmp(&b.name));
        }
        by_step
    }
}
