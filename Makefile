# A thin front to meson: `make` builds, `make run` shows hutch at work,
# `make test` runs every test, `make bench` measures against peers.
BUILD ?= build
ASAN  ?= build-asan
PY    ?= /usr/bin/python3

.PHONY: all deps run test unit integration bench clean

all: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)

deps:
	@./scripts/deps.sh

$(BUILD)/build.ninja:
	meson setup $(BUILD) >/dev/null

$(ASAN)/build.ninja:
	meson setup $(ASAN) -Dsanitize=true >/dev/null

run: all
	@./scripts/demo.sh $(BUILD)

test: all $(ASAN)/build.ninja
	ninja -C $(ASAN)
	./scripts/test.sh $(BUILD) $(ASAN)

bench: all
	@./scripts/deps.sh --bench
	$(PY) bench/startup --hutch $(BUILD)/hutch

clean:
	rm -rf $(BUILD) $(ASAN)
