// The kstatus helper of the GitOps tests: built by tests/gitops/build-kstatus.sh into a cache
// outside the repository (go.sum is resolved there, at build time).
module workflow-operator.local/kstatus

go 1.24

require sigs.k8s.io/cli-utils v0.37.2
