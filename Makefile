# workflow-operator: build, test and run. `make help` lists the targets.
SHELL := /bin/bash
SHARED ?= $(abspath ../shared)
CARGO ?= cargo
export CARGO_TERM_COLOR ?= never

.PHONY: help plugins build lint fmt test manifests install run demo deploy bench clean

help: ## List the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

plugins: ## Build the built-in workflow types into target/plugins/<type>.wasm
	$(SHARED)/toolchain/ensure-wasm-target
	./plugins/build.sh

include tests/cluster/cluster.mk
