#!/usr/bin/env bash
# Every tracked *.h and *.cpp (third_party/ aside) as clang-format (.clang-format) would write it:
# `make format` fixes what this reports. Exits 77, which ctest counts as skipped, when
# clang-format or the git checkout is missing, so that the suite says so instead of passing.
#
#   check_format.sh [SOURCE_DIR]
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"
CLANG_FORMAT=${CLANG_FORMAT:-clang-format}

if ! command -v "$CLANG_FORMAT" >/dev/null; then
  echo "check_format: skipped: $CLANG_FORMAT is not installed (scripts/install-deps.sh installs it)"
  exit 77
fi
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "check_format: skipped: $PWD is not a git checkout, so there is no list of tracked files"
  exit 77
fi

files=()
while IFS= read -r -d '' f; do
  # A tracked file deleted in the working tree is not checked.
  [[ -f "$f" ]] && files+=("$f")
done < <(git ls-files -z -- '*.h' '*.cpp' ':!:third_party/')

echo "check_format: $("$CLANG_FORMAT" --version | head -n1), ${#files[@]} files"
# With no file, clang-format would read its standard input.
((${#files[@]} > 0)) || exit 0
if ! "$CLANG_FORMAT" --dry-run -Werror "${files[@]}"; then
  echo "check_format: the files above differ from clang-format's layout: run \`make format\`" >&2
  exit 1
fi
