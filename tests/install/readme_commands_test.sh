#!/usr/bin/env bash
# Runs every shell block of README.md (```sh, ```bash, ```shell) as written. Each one carries a
# comment on the line before it:
#
#   <!-- README test: NAME -->              run here
#   <!-- README test: not run: REASON -->   not run, for the stated reason (the reason is required)
#
# and a shell block without one fails the test, so none escapes it. The blocks that run, run in
# README order in one shell session, as a user would type them: the block named `install` in the
# source tree (HOME is a fresh directory, so `make install PREFIX=$HOME/.local` installs there,
# and BUILD_DIR in the environment is the build tree under test), every other one in a fresh
# working directory where `build` is that build tree. Every command must exit with 0; a few
# outputs are checked on top.
#
#   readme_commands_test.sh SOURCE_DIR BUILD_DIR WORK_DIR
set -euo pipefail
src=$1 build=$2 work=$3

fail() {
  echo "README test: $*" >&2
  exit 1
}

rm -rf "$work"
mkdir -p "$work/home" "$work/run" "$work/blocks"
ln -s "$(cd "$build" && pwd)" "$work/run/build"

# Each shell block into blocks/NN.sh, and a line "NN<tab>LINE<tab>MARKER" per block in
# blocks/manifest (MARKER: the text after "README test:", empty without a comment). A marker
# counts when only blank lines separate it from the fence.
awk -v dir="$work/blocks" '
  BEGIN { manifest = dir "/manifest"; printf "" > manifest }
  fence == "" && /^[ \t]*```/ {
    fence = $0; sub(/^[ \t]*/, "", fence); lang = fence; sub(/^`+/, "", lang); gsub(/[ \t]/, "", lang)
    shell = lang ~ /^(sh|bash|shell)$/
    if (shell) {
      n++; out = sprintf("%s/%02d.sh", dir, n); printf "" > out
      printf "%02d\t%d\t%s\n", n, NR, marker >> manifest
    }
    marker = ""; next
  }
  fence != "" {
    if ($0 ~ /^[ \t]*```+[ \t]*$/) { fence = ""; if (shell) close(out); next }
    if (shell) print > out
    next
  }
  /^[ \t]*$/ { next }
  /<!-- README test:.*-->/ {
    marker = $0; sub(/.*<!-- README test:[ \t]*/, "", marker); sub(/[ \t]*-->.*/, "", marker); next
  }
  { marker = "" }
  END { if (fence != "") { print "README.md: a code block is never closed" > "/dev/stderr"; exit 1 } }
' "$src/README.md" || fail "cannot read the blocks of README.md"

session="$work/session.sh"
printf 'set -euo pipefail -x\n' >"$session"
ran=()
while IFS=$'\t' read -r n line marker; do
  case $marker in
    "") fail "README.md:$line: a shell block without '<!-- README test: NAME -->' (run by this test)" \
      "or '<!-- README test: not run: REASON -->' before it" ;;
    "not run"*)
      reason=${marker#not run}
      reason=${reason#:}
      [[ -n ${reason// /} ]] || fail "README.md:$line: 'not run' needs a reason"
      echo "README test: not running the block at README.md:$line:$reason" ;;
    *)
      [[ $marker =~ ^[a-z0-9_-]+$ ]] || fail "README.md:$line: the block name '$marker' is not a word"
      if [[ $marker == install ]]; then dir=$src; else dir=$work/run; fi
      printf '# README.md:%s (%s)\ncd %q\n' "$line" "$marker" "$dir" >>"$session"
      cat "$work/blocks/$n.sh" >>"$session"
      ran+=("$marker") ;;
  esac
done <"$work/blocks/manifest"
[[ ${#ran[@]} -gt 0 ]] || fail "no shell block of README.md is run"
for name in install cli; do
  [[ " ${ran[*]} " == *" $name "* ]] || fail "no block marked '$name' in README.md"
done

# A make that started this test (make test) must not lend its job server to the make it runs.
unset MAKEFLAGS MFLAGS MAKELEVEL
export HOME="$work/home" BUILD_DIR="$build"

log="$work/log.txt"
if ! bash "$session" >"$log" 2>&1; then
  cat "$log"
  fail "a command failed (the log is above)"
fi

grep -qx "trainhooks [0-9.]*" "$log" || { cat "$log"; fail "no 'trainhooks --version' line"; }
[[ -x $HOME/.local/bin/trainhooks ]] || fail "make install did not put trainhooks in \$HOME/.local/bin"
grep -q "checkpoints listed in runs/seed/checkpoint" "$log" || { cat "$log"; fail "no checkpoint list"; }
grep -qE "^([0-9]+) of \1 checkpoints OK$" "$log" || { cat "$log"; fail "verify did not find every checkpoint OK"; }
grep -q "^trainhooks report: wrote runs/report.html" "$log" || { cat "$log"; fail "no report written"; }
grep -q "window.TRAINHOOKS_REPORT" "$work/run/runs/report.html" || fail "runs/report.html is not a report"
echo "README test: every shell block marked to run ran (${ran[*]})"
