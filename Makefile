# trainhooks: `make demo` runs the main job, `make test` runs the whole test suite.
# Both install missing Debian packages first (scripts/install-deps.sh), then configure and build.
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

# What `make demo` runs: the library, the two examples and the CLI, nothing else.
DEMO_TARGETS = fashion_mnist seed_linear_regression trainhooks_cli

.PHONY: all deps configure build build-demo demo test bench clean format

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

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

bench: build
	bash scripts/bench.sh $(BUILD_DIR)

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
