# trainhooks: `make demo` runs the main job, `make test` runs the whole test suite.
# Both install missing Debian packages first (scripts/install-deps.sh), then configure and build.
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

# What `make demo` runs: the library, the two examples and the CLI, nothing else.
DEMO_TARGETS = fashion_mnist seed_linear_regression trainhooks_cli

.PHONY: all deps configure build build-demo build-bench demo test bench bench-docs clean format

all: build

deps:
	@bash scripts/install-deps.sh

$(BUILD_DIR)/build.ninja: | deps
	cmake -S . -B $(BUILD_DIR) -G Ninja $(CMAKE_FLAGS)

configure: deps $(BUILD_DIR)/build.ninja

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

build-demo: configure
	cmake --build $(BUILD_DIR) -j $(JOBS) --target $(DEMO_TARGETS)

demo: build-demo
	bash scripts/demo.sh $(BUILD_DIR)

# One test more than there are cores: a third of the suite's time is waiting (programs starting,
# sockets, timeouts); with -j2 on 2 cores 1.4 cores were busy (docs/testing.md).
TEST_JOBS ?= $(shell echo $$(($(JOBS) + 1)))

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(TEST_JOBS)

# `make bench` ends with one table of every budget (also in $(BUILD_DIR)/bench/budgets.md);
# `make bench-docs` runs the same and puts that table into docs/benchmarks.md.
# The benchmarks are not part of `build` (bench/CMakeLists.txt): `build-bench` adds them.
build-bench: build
	cmake --build $(BUILD_DIR) -j $(JOBS) --target benches

bench: build-bench
	bash scripts/bench.sh $(BUILD_DIR)

bench-docs: build-bench
	bash scripts/bench.sh --update-docs $(BUILD_DIR)

format:
	clang-format -i $$(git ls-files '*.h' '*.cpp')

clean:
	rm -rf $(BUILD_DIR)

# `make install [PREFIX=DIR]`: `trainhooks` in DIR/bin, the libraries, headers and CMake package
# (find_package(trainhooks)) under DIR; builds only what is installed.
PREFIX ?= /usr/local
.PHONY: install
install: configure
	cmake --build $(BUILD_DIR) -j $(JOBS) --target trainhooks_cli trainhooks_testing
	cmake --install $(BUILD_DIR) --prefix $(PREFIX)

# ---- Sanitizers and fuzzing (docs/testing.md) -------------------------------------------------
# `make sanitize`: the library, the examples, the CLI and the whole test suite with ASan + UBSan in
# build-asan/, then ctest there. `make tsan`: ThreadSanitizer in build-tsan/, the tests of the
# threaded parts (TSAN_TESTS). `make fuzz FUZZ_SECONDS=N`: each libFuzzer target N seconds.
# The sanitizer options reach every test through ctest's environment, and from the tests the
# programs they start (examples, checkpoint_trainer, the CLI).
ASAN_BUILD_DIR ?= build-asan
TSAN_BUILD_DIR ?= build-tsan
FUZZ_BUILD_DIR ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?=
SANITIZER_CMAKE_FLAGS = -DTRAINHOOKS_BUILD_BENCH=OFF
SANITIZER_DIR = $(CURDIR)/sanitizers
# ctest -R: the suites of the event writer and its queue, the asynchronous checkpoint writer, the
# Coordinator and preemption handling.
TSAN_TESTS ?= ^(EventWriter|BatchQueue|AsyncCheckpointWriter|Coordinator|Preemption|MonitoredSessionStop|KillTest)

# halt_on_error and abort_on_error: the first report fails the test, with its output kept.
ASAN_ENV = ASAN_OPTIONS=halt_on_error=1:abort_on_error=1:detect_leaks=1:strict_init_order=1:check_initialization_order=1:suppressions=$(SANITIZER_DIR)/asan.supp
LSAN_ENV = LSAN_OPTIONS=suppressions=$(SANITIZER_DIR)/lsan.supp:print_suppressions=0
UBSAN_ENV = UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:suppressions=$(SANITIZER_DIR)/ubsan.supp
TSAN_ENV = TSAN_OPTIONS=halt_on_error=1:abort_on_error=1:second_deadlock_stack=1:suppressions=$(SANITIZER_DIR)/tsan.supp

SANITIZE_TARGETS ?=
SANITIZE_CTEST_ARGS ?=

.PHONY: sanitize tsan fuzz

$(ASAN_BUILD_DIR)/build.ninja: | deps
	cmake -S . -B $(ASAN_BUILD_DIR) -G Ninja -DTRAINHOOKS_SANITIZE=address,undefined $(SANITIZER_CMAKE_FLAGS)

sanitize: deps $(ASAN_BUILD_DIR)/build.ninja
	cmake --build $(ASAN_BUILD_DIR) -j $(JOBS) $(if $(SANITIZE_TARGETS),--target $(SANITIZE_TARGETS))
	cd $(ASAN_BUILD_DIR) && $(ASAN_ENV) $(LSAN_ENV) $(UBSAN_ENV) ctest --output-on-failure -j $(JOBS) $(SANITIZE_CTEST_ARGS)

# What .ci/run checks under ASan + UBSan within CI's time: the event-file and base libraries'
# suites (summary_tests: the event writer, its queue and reader, record I/O, CRC32C, atomic
# files). The whole suite under `make sanitize` runs clean too, but needs a second, instrumented
# build of everything (about 20 more minutes on 2 cores); it joins CI once a fresh-clone run of
# both has been timed within CI's limit (docs/testing.md).
.PHONY: sanitize-ci
sanitize-ci:
	$(MAKE) sanitize SANITIZE_TARGETS=summary_tests SANITIZE_CTEST_ARGS="-L summary_tests"

$(TSAN_BUILD_DIR)/build.ninja: | deps
	cmake -S . -B $(TSAN_BUILD_DIR) -G Ninja -DTRAINHOOKS_SANITIZE=thread $(SANITIZER_CMAKE_FLAGS)

# OMP_NUM_THREADS=1: LibTorch's OpenMP pool synchronises inside uninstrumented libgomp, which
# TSan cannot see (docs/testing.md).
tsan: deps $(TSAN_BUILD_DIR)/build.ninja
	cmake --build $(TSAN_BUILD_DIR) -j $(JOBS) --target trainhooks_tests summary_tests
	cd $(TSAN_BUILD_DIR) && $(TSAN_ENV) OMP_NUM_THREADS=1 ctest --output-on-failure -j $(JOBS) -R '$(TSAN_TESTS)'

$(FUZZ_BUILD_DIR)/build.ninja: | deps
	cmake -S fuzz -B $(FUZZ_BUILD_DIR) -G Ninja -DCMAKE_CXX_COMPILER=clang++-14

fuzz: deps $(FUZZ_BUILD_DIR)/build.ninja
	cmake --build $(FUZZ_BUILD_DIR) -j $(JOBS)
	bash fuzz/run.sh $(FUZZ_BUILD_DIR) $(FUZZ_SECONDS) $(FUZZ_TARGETS)
