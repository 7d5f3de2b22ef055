# workflow-operator: build, test and run. `make help` lists the targets.
SHELL := /bin/bash
CARGO ?= cargo
# The kubectl the scripts choose (scripts/lib.sh): within one minor version of the local
# cluster's v1.34 when installed side by side.
ifeq ($(origin KUBECTL),undefined)
KUBECTL := $(shell source '$(CURDIR)/scripts/lib.sh' && printf '%s' "$$KUBECTL")
endif
export KUBECTL
export CARGO_TERM_COLOR ?= never
TARGET_DIR := $(or $(CARGO_TARGET_DIR),$(CURDIR)/target)

.PHONY: help tools plugins build lint fmt test test-unit docs manifests install uninstall run demo deploy deploy-plugins undeploy bench bench-cluster bench-fleet bench-real-node bench-runner bench-reload bench-languages bench-webhook bench-join bench-ui

help: ## List the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

tools: ## Install the Debian packages demo and test need, when missing (as root; scripts/tools.sh)
	./scripts/tools.sh

plugins: ## Build the built-in workflow types into target/plugins/<type>.wasm
	./plugins/build.sh

build: ## Build the operator binary (target/debug/workflow-operator)
	$(CARGO) build -p workflow-operator

lint: ## rustfmt check and clippy with -D warnings
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) clippy -p workflow-operator --all-targets --features bench -- -D warnings

fmt: ## Format the code
	$(CARGO) fmt --all

# The end-to-end tests start the local cluster themselves when it is not up (and use
# WORKFLOW_E2E_KUBECONFIG when set); a cluster this target started is stopped afterwards. Its real
# node (tests/cluster/node.sh, root) starts too: the real node tests fail without it.
test: tools plugins image ## Unit, plugin and end-to-end tests (starts the local cluster with its real node; the image test unpacks make image)
	@# The tests run their own operators; one left by `make demo` would race them.
	@if [ -f .local-cluster/pids/operator.pid ]; then \
	  echo "stopping the operator left by make demo (the tests run their own)"; \
	  kill "$$(cat .local-cluster/pids/operator.pid)" 2>/dev/null || true; rm -f .local-cluster/pids/operator.pid; \
	fi
	@# Its hosts, Nodes now, would take the tests' pods (they have none of the tests' images).
	@if [ -d .local-cluster/target-hosts ]; then \
	  echo "taking out the Nodes make demo joined (its target hosts)"; \
	  tests/cluster/target-hosts.sh down .local-cluster/target-hosts >/dev/null 2>&1 || true; \
	  KUBECONFIG=.local-cluster/kubeconfig $(KUBECTL) delete nodes -l workflow.rxg456.cn/joined-by=demo \
	    --ignore-not-found --wait=false >/dev/null 2>&1 || true; \
	fi
	@was_up=0; tests/cluster/cluster.sh status >/dev/null 2>&1 && was_up=1; \
	WORKFLOW_REAL_NODE=$${WORKFLOW_REAL_NODE-1} $(CARGO) test --workspace --no-fail-fast; rc=$$?; \
	if [ $$was_up = 0 ] && [ -z "$$KEEP_CLUSTER" ]; then tests/cluster/cluster.sh down; fi; \
	exit $$rc

# The book (docs/): mdBook, installed on first use into a cache outside the repository keyed by
# its version (as the local cluster's binaries are), with a cargo target directory of its own.
MDBOOK_VERSION := 0.4.52
MDBOOK_TOOLS := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/workflow-operator/tools
MDBOOK := $(MDBOOK_TOOLS)/mdbook-$(MDBOOK_VERSION)/bin/mdbook
docs: ## Build the book into docs/book/ (mdBook, installed when missing) and check it and README.md: links, anchors, shown commands
	@[ -x '$(MDBOOK)' ] || CARGO_TARGET_DIR='$(MDBOOK_TOOLS)/mdbook-build' $(CARGO) install --locked mdbook \
	  --version $(MDBOOK_VERSION) --no-default-features --features search --root '$(MDBOOK_TOOLS)/mdbook-$(MDBOOK_VERSION)'
	'$(MDBOOK)' build docs
	python3 scripts/check_docs.py

# The tests that need neither a cluster nor root: every crate's unit tests and doc tests, the
# plugin tests (host/tests/plugin_*.rs: the plugins of `make plugins`, no cluster) and the
# runner's (runner/tests/targets.rs: an sshd of its own on loopback, as the calling user).
test-unit: plugins ## Unit and plugin tests only: no cluster, no root (sshd installed for the runner's)
	$(CARGO) test --workspace --lib --bins --no-fail-fast
	$(CARGO) test --workspace --doc --no-fail-fast
	$(CARGO) test -p workflow-operator --test plugin_runtime --test plugin_registry --test plugin_cli --no-fail-fast
	$(CARGO) test -p workflow-runner --test targets --no-fail-fast

manifests: ## Regenerate crds/ from the Rust types
	$(CARGO) run -q -p workflow-operator -- crdgen > crds/workflow.rxg456.cn.yaml

install: ## Install the CRDs into the current cluster
	$(KUBECTL) apply -k crds/

uninstall: ## Remove the CRDs (and every WorkflowGroup and Workflow) from the current cluster
	$(KUBECTL) delete -k crds/ --ignore-not-found

run: plugins ## Run the operator against the current kubeconfig, plugins from target/plugins/
	$(CARGO) run -p workflow-operator -- run --plugin-dir $(TARGET_DIR)/plugins

deploy-plugins: plugins ## Copy the built-in plugins into deploy/plugins/, where the kustomize base takes them
	mkdir -p deploy/plugins
	cp $(foreach t,pre-check setup post-check at decommission,$(TARGET_DIR)/plugins/$(t).wasm) deploy/plugins/

deploy: deploy-plugins ## Install into the current cluster (kustomize base deploy/, image IMG=registry/name:tag)
	KUBECTL=$(KUBECTL) IMG=$(or $(IMG),workflow-operator:dev) ./scripts/deploy.sh

undeploy: ## Remove what make deploy installed (and every WorkflowGroup and Workflow)
	$(KUBECTL) delete -k deploy/ --ignore-not-found

demo: tools plugins build image ## Everything on the local cluster: the seed's sample group run to Completed (as root also against target hosts it starts)
	./scripts/demo.sh

bench-real-node: plugins ## The seed sample on the real node against the same five pods run by hand (RUNS, default 5)
	./scripts/bench-real-node.sh

bench-runner: ## workflow-runner's fan-out over SSH: TARGETS (100) on HOSTS (50) target hosts, at PARALLEL ("16 100") at a time; then --copy of COPY_MB (64) MiB to 1 and 10 targets (root)
	./scripts/bench-runner.sh

bench-cluster: plugins ## Groups on the local cluster: the seed sample alone, then N (default 100) at once; PEER=argo|tekton|all: peers side by side; the dist build (PROFILE=release for release)
	N=$(or $(N),100) ./scripts/bench-cluster.sh

bench-fleet: plugins ## A fleet on the local cluster: one group of 5000 targets in waves of 10%, then 50 groups of 100 over 1000 machines (locks on)
	./scripts/bench-fleet.sh

bench-ui: tools build ## The web view in headless Chromium: status change to page drawn (p50/p99 over CHANGES, 100), and GROUPS (1000) groups listed: RSS, JS heap
	CHANGES=$(or $(CHANGES),100) GROUPS=$(or $(GROUPS),1000) $(CARGO) run -q -p workflow-operator --example bench_ui

bench-languages: ## The same workflow type in Rust, Python and JavaScript: size, compile, load, call times, memory
	./scripts/bench-languages.sh

bench-reload: plugins ## A plugin ConfigMap changed 10 times on the local cluster: time until each version is served
	./scripts/bench-reload.sh

bench-join: plugins image ## A cluster-expansion group joining HOSTS (3) target hosts as Nodes, RUNS (3) times: time to Ready by step, operator CPU and RSS (root)
	./scripts/bench-join.sh

bench-webhook: plugins ## The admission webhook's latency per review, p50/p99 (COUNT reviews per case, PROFILE release|debug)
	./scripts/bench-webhook.sh

bench: plugins ## Plugin call benchmarks (criterion)
	$(CARGO) bench -p workflow-operator --features bench --bench plugin_calls

# The container image, built without a container engine (umoci, skopeo; installed when missing).
IMAGE ?= $(or $(IMG),workflow-operator:dev)
.PHONY: image
image: ## Build the image IMAGE (default workflow-operator:dev) into target/image/ (OCI layout, archives); PROFILE=dist for the one to publish (fat LTO)
	IMAGE=$(IMAGE) ./scripts/build-image.sh

include tests/cluster/cluster.mk
