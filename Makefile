# uprobe: a thin wrapper over CMake.  Verbs: make, make run, make test, make bench, make fuzz.
BUILD    ?= build
JOBS     ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
ifeq ($(CI),true)
CMAKE_FLAGS += -DUPROBE_WERROR=ON
endif

.PHONY: all setup configure run test bench fuzz clean asan

all: configure
	cmake --build $(BUILD) -j$(JOBS)

configure:
	@test -f $(BUILD)/CMakeCache.txt || cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

setup:
	@scripts/setup.sh

run: setup all
	@scripts/run-sample.sh $(BUILD)

test: setup all
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS) $(CTEST_ARGS)

asan: setup
	$(MAKE) BUILD=build-asan CMAKE_FLAGS="$(CMAKE_FLAGS) -DUPROBE_SANITIZE=ON" test

bench: setup all
	@scripts/bench.sh $(BUILD)

fuzz: setup
	@scripts/fuzz.sh

clean:
	rm -rf $(BUILD) build-asan
