# A thin front to meson: `make` builds, `make install` installs (the bash
# completion), `make run` shows hutch at work,
# `make template` makes the code-interpreter template,
# `make mcp-gateway-template` the template of E2B's Sandbox.create({mcp}),
# `make test` runs every test (on a cgroup v2 guest, a pinned part),
# `make test-v2` runs all of the suite that guest can (~30 min under TCG),
# `make test-fresh` runs `make test` in a fresh Debian 12 root as CI does,
# `make bench` measures against peers,
# `make fuzz` runs each fuzz target for FUZZ_SECONDS (tests/fuzz/README.md),
# `make e2b-conformance` runs E2B's own test suites against hutch,
# `make mcp-conformance` MCP's conformance suite against hutch serve's /mcp.
BUILD ?= build
ASAN  ?= build-asan
FUZZ  ?= build-fuzz
PY    ?= /usr/bin/python3
FUZZ_SECONDS ?= 300
FUZZ_ONLY ?=
FUZZ_EXES = tests/fuzz_request tests/fuzz_connect tests/fuzz_body tests/fuzz_multipart tests/fuzz_ws \
  tests/fuzz_dockerfile tests/fuzz_scrub tests/fuzz_mcp

.PHONY: all deps install run template mcp-gateway-template test test-v2 test-fresh fuzz e2b-conformance mcp-conformance bench bench-scale bench-tiers clean

all: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)

# The packages each goal needs (scripts/deps.sh); a goal's choice holds for
# the `deps` it depends on through `all`.
deps:
	@./scripts/deps.sh $(DEPS)

$(BUILD)/build.ninja:
	meson setup $(BUILD) >/dev/null

$(ASAN)/build.ninja:
	meson setup $(ASAN) -Dsanitize=true >/dev/null

$(FUZZ)/build.ninja:
	CC=clang meson setup $(FUZZ) -Dfuzz=true >/dev/null

# What meson installs (the bash completion, under its --prefix; DESTDIR
# is honoured).
install: all
	meson install -C $(BUILD)

run: all
	@./scripts/demo.sh $(BUILD)

# The code-interpreter template in the store (docs/templates.md): a Debian
# base mmdebstrap bootstraps with its packages, then the Dockerfile in
# share/templates/code-interpreter. E2B's code-interpreter sandboxes use it
# once it is there; without it they run on the host template.
template: DEPS = --test
template: all
	./scripts/code-interpreter.sh $(BUILD)

# The mcp-gateway template (docs/mcp-gateway.md): a Debian base with python3
# and git, then share/templates/mcp-gateway/Dockerfile, which installs
# share/mcp-gateway/mcp-gateway. E2B's Sandbox.create({mcp: ...}) uses it.
mcp-gateway-template: DEPS = --test
mcp-gateway-template: all
	./scripts/mcp-gateway-template.sh $(BUILD)

test: DEPS = --test
test: all $(ASAN)/build.ninja $(FUZZ)/build.ninja
	ninja -C $(ASAN)
	ninja -C $(FUZZ) $(FUZZ_EXES)
	./scripts/test.sh $(BUILD) $(ASAN) $(FUZZ)

# The integration suite on the cgroup v2 guest, all of what it can run
# there, where make test runs a pinned part (scripts/test-v2.sh).
test-v2: DEPS = --test
test-v2: all $(ASAN)/build.ninja
	ninja -C $(ASAN)
	./scripts/test-v2.sh $(BUILD) $(ASAN) all

# The long run: each target (or those FUZZ_ONLY names) for FUZZ_SECONDS.
fuzz: DEPS = --test
fuzz: deps $(FUZZ)/build.ninja
	ninja -C $(FUZZ) $(FUZZ_EXES)
	./scripts/fuzz.sh $(FUZZ) $(FUZZ_SECONDS) $(FUZZ_ONLY)

# MCP's conformance suite, every server scenario (tests/mcp-conformance):
# make test runs a pinned part.
mcp-conformance: DEPS = --test
mcp-conformance: all
	tests/mcp-conformance/run

# E2B's own suites at their pinned commits, unchanged (docs/e2b.md): E2B_GIT
# and E2B_CI_GIT name clones of e2b-dev/E2B and e2b-dev/code-interpreter.
e2b-conformance: DEPS = --test
e2b-conformance: all
	tests/e2b-conformance/run

# The committed HEAD, cloned into a fresh Debian 12 root (docs/ci.md).
test-fresh:
	./scripts/fresh-debian.sh

bench: DEPS = --bench
bench: all
	$(PY) bench/startup --hutch $(BUILD)/hutch
	$(PY) bench/serve --build $(BUILD)
	$(PY) bench/lifecycle --build $(BUILD)
	$(PY) bench/network --build $(BUILD)
	$(PY) bench/templates --build $(BUILD)
	$(PY) bench/events --build $(BUILD)
	$(PY) bench/mcp --build $(BUILD)
	$(PY) bench/ctl --build $(BUILD)

# Issue 19's figures in one table: bursts, idle ladder, churn, data (~10 min).
bench-scale: DEPS = --bench
bench-scale: all
	$(PY) bench/scale --build $(BUILD)

# Issue 20's figures: the isolation tiers beside bare runsc (~3 min).
bench-tiers: DEPS = --bench
bench-tiers: all
	$(PY) bench/tiers --build $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN) $(FUZZ)
