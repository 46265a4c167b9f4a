#!/usr/bin/env bash
# Installs every Debian package that building, testing and running trainhooks needs.
# Idempotent and non-interactive; a fast no-op when everything is present.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config make git
  libtorch-dev libgloo-dev python3 python3-torch
  protobuf-compiler libprotobuf-dev
  # the tests' independent decoder of event files (graph events, HParams summaries)
  python3-protobuf
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev libfmt-dev libspdlog-dev
  libpng-dev zlib1g-dev libisal-dev
  # make test's SourceFormat and make format (Debian 12: clang-format 14)
  clang-format
  # trainhooks board: the HTTP server library; its browser tests run headless Chromium
  libcpp-httplib-dev chromium
  dataset-fashion-mnist
  # the two-node test: network namespaces (ip netns) and a host name per node (unshare)
  iproute2 util-linux
  # make sanitize / make tsan: GCC's sanitizer runtimes (g++ usually brings them along)
  libasan8 libubsan1 libtsan2
  # make fuzz: clang with libFuzzer; llvm-14 for symbolized sanitizer reports
  clang-14 libclang-rt-14-dev llvm-14
)

missing=()
for p in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
