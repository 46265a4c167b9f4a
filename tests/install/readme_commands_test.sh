#!/usr/bin/env bash
# Runs the README's command blocks marked `<!-- README test: install -->` and
# `<!-- README test: cli -->` as written, one shell session as a user would type them: the install
# block in the source tree (HOME is a fresh directory, so `make install PREFIX=$HOME/.local`
# installs there, and BUILD_DIR in the environment is the build tree under test), then the CLI
# block in a fresh working directory where `build` is that build tree. Every command must exit
# with 0; a few outputs are checked on top.
#
#   readme_commands_test.sh SOURCE_DIR BUILD_DIR WORK_DIR
set -euo pipefail
src=$1 build=$2 work=$3

fail() {
  echo "README test: $*" >&2
  exit 1
}

# The lines of the fenced block that follows the marker.
block() {
  awk -v marker="<!-- README test: $1 -->" '
    $0 == marker { found = 1; next }
    found && /^```/ { if (inside) exit; inside = 1; next }
    inside { print }' "$src/README.md"
}

install_block=$(block install)
cli_block=$(block cli)
[[ -n $install_block ]] || fail "no block marked 'install' in README.md"
[[ -n $cli_block ]] || fail "no block marked 'cli' in README.md"

rm -rf "$work"
mkdir -p "$work/home" "$work/run"
ln -s "$(cd "$build" && pwd)" "$work/run/build"
# A make that started this test (make test) must not lend its job server to the make it runs.
unset MAKEFLAGS MFLAGS MAKELEVEL
export HOME="$work/home" BUILD_DIR="$build"

log="$work/log.txt"
if ! bash -euo pipefail -x -c "cd '$src'
$install_block
cd '$work/run'
$cli_block" >"$log" 2>&1; then
  cat "$log"
  fail "a command failed (the log is above)"
fi

grep -qx "trainhooks [0-9.]*" "$log" || { cat "$log"; fail "no 'trainhooks --version' line"; }
[[ -x $HOME/.local/bin/trainhooks ]] || fail "make install did not put trainhooks in \$HOME/.local/bin"
grep -q "checkpoints listed in runs/seed/checkpoint" "$log" || { cat "$log"; fail "no checkpoint list"; }
grep -qE "^([0-9]+) of \1 checkpoints OK$" "$log" || { cat "$log"; fail "verify did not find every checkpoint OK"; }
echo "README test: every command of the install and cli blocks ran"
