# A thin front to meson: `make` builds, `make run` shows hutch at work,
# `make test` runs every test, `make test-fresh` runs `make test` in a
# fresh Debian 12 root as CI does, `make bench` measures against peers.
BUILD ?= build
ASAN  ?= build-asan
FUZZ  ?= build-fuzz
PY    ?= /usr/bin/python3

.PHONY: all deps run test test-fresh bench clean

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

run: all
	@./scripts/demo.sh $(BUILD)

test: DEPS = --test
test: all $(ASAN)/build.ninja $(FUZZ)/build.ninja
	ninja -C $(ASAN)
	ninja -C $(FUZZ) tests/fuzz_request
	./scripts/test.sh $(BUILD) $(ASAN) $(FUZZ)

# The committed HEAD, cloned into a fresh Debian 12 root (docs/ci.md).
test-fresh:
	./scripts/fresh-debian.sh

bench: DEPS = --bench
bench: all
	$(PY) bench/startup --hutch $(BUILD)/hutch
	$(PY) bench/serve --build $(BUILD)
	$(PY) bench/lifecycle --build $(BUILD)
	$(PY) bench/network --build $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN) $(FUZZ)
