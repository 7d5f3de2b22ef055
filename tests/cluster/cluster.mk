# Local Kubernetes cluster targets (see tests/cluster/README.md).
# Included from the top-level Makefile: `include tests/cluster/cluster.mk`.
CLUSTER_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))

.PHONY: cluster-build cluster-up cluster-down cluster-status

cluster-build: ## Build the cluster binaries once (cached in ~/.cache/workflow-operator)
	$(CLUSTER_DIR)/build.sh

cluster-up: ## Start the local cluster (idempotent); writes .local-cluster/kubeconfig
	$(CLUSTER_DIR)/cluster.sh up

cluster-down: ## Stop every cluster process and remove .local-cluster/
	$(CLUSTER_DIR)/cluster.sh down

cluster-status: ## Show the state of each cluster component
	$(CLUSTER_DIR)/cluster.sh status
