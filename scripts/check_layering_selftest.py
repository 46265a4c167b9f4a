#!/usr/bin/env python3
"""check_layering.py on small trees made here: it passes a clean tree and catches each kind of
break (a forbidden include, one reached through another header, an "only" rule, a file in no
layer), an exception that is not listed and one that no longer occurs.

  check_layering_selftest.py    exit 1 on the first case that goes wrong
"""

import os
import subprocess
import sys
import tempfile

CHECKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "check_layering.py")

DOC_START = "# Architecture\n\n## Rules the suite checks\n\n```text\n"
RULES = """\
# A small tree: low below high below top; ext stands for another library.
layer low: include/trainhooks/low.h src/low/**
layer high: include/trainhooks/high.h src/high/**
layer top: include/trainhooks/top.h
layer ext: <ext/**>
low may include:
high may include: low ext
top may include: low high
never top -> ext: top stays free of ext
only src/low/** from low: low's private headers are its own
"""

TREE = {
    "include/trainhooks/low.h": "#pragma once\n#include <vector>\n",
    "src/low/detail.h": "#pragma once\n",
    # In layer low as the source of low.h: no pattern names it.
    "src/low.cpp": '#include "trainhooks/low.h"\n#include "low/detail.h"\n',
    "include/trainhooks/high.h":
        '#pragma once\n#include <ext/thing.h>\n#include "trainhooks/low.h"\n',
    "src/high/high.cpp": '#include "trainhooks/high.h"\n',
    "include/trainhooks/top.h": '#pragma once\n#include "trainhooks/low.h"\n',
}


def run(changes=None, exceptions=(), args=()):
    """The checker's exit status and output on TREE with changes (path: new text)."""
    with tempfile.TemporaryDirectory() as root:
        for path, text in {**TREE, **(changes or {})}.items():
            os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
            with open(os.path.join(root, path), "w") as f:
                f.write(text)
        os.makedirs(os.path.join(root, "docs"))
        with open(os.path.join(root, "docs", "architecture.md"), "w") as f:
            f.write(DOC_START + RULES + "".join(line + "\n" for line in exceptions) + "```\n")
        done = subprocess.run([sys.executable, CHECKER, "--root", root, *args],
                              capture_output=True, text=True)
        return done.returncode, done.stdout + done.stderr


def expect(case, status, output, code, *texts):
    missing = [t for t in texts if t not in output]
    if status != code or missing:
        print(f"FAILED: {case}: exit {status} (expected {code}), missing {missing}\n{output}")
        sys.exit(1)
    print(f"ok: {case}")


def main():
    expect("a clean tree passes", *run(), 0, "6 files")
    expect("--list names each file's layer, a source by its header's",
           *run(args=["--list"]), 0, "low          src/low.cpp", "high         src/high/high.cpp")

    upward = {"src/low.cpp": TREE["src/low.cpp"] + '#include "trainhooks/high.h"\n'}
    expect("an include of a higher layer, not listed, fails", *run(upward), 1,
           'src/low.cpp:3: includes "trainhooks/high.h" (layer low may not include layer high: '
           "low may include only itself)")
    listed = ["exception src/low.cpp -> include/trainhooks/high.h: kept while it moves"]
    expect("the same include listed as a known exception passes", *run(upward, listed), 0)
    other = ["exception src/high/high.cpp -> include/trainhooks/top.h: another include"]
    expect("a break fails when only another include is listed", *run(upward, other), 1,
           "src/low.cpp:3", "the known exception src/high/high.cpp -> include/trainhooks/top.h "
           "no longer occurs")
    line = (DOC_START + RULES).count("\n") + 1
    expect("a listed exception that no longer occurs fails", *run(exceptions=listed), 1,
           f"docs/architecture.md:{line}: the known exception src/low.cpp -> "
           "include/trainhooks/high.h no longer occurs")

    through = {"include/trainhooks/top.h": TREE["include/trainhooks/top.h"]
               + '#include "trainhooks/high.h"\n'}
    expect("a library reached through an allowed header fails (never)", *run(through), 1,
           'include/trainhooks/top.h:3: includes "trainhooks/high.h", which reaches <ext/thing.h> '
           "in include/trainhooks/high.h (layer top may not include layer ext: top stays free "
           "of ext)")
    private = {"src/high/high.cpp": TREE["src/high/high.cpp"] + '#include "low/detail.h"\n'}
    expect("another layer's private header fails (only)", *run(private), 1,
           "src/high/high.cpp:2: includes \"low/detail.h\" (layer high may not include layer low: "
           "low's private headers are its own)")
    expect("a file in no layer fails", *run({"src/newfolder/new.cpp": "int x;\n"}), 1,
           "src/newfolder/new.cpp: in no layer")
    expect("an include of a file not in the tree fails",
           *run({"src/high/high.cpp": '#include "high/gone.h"\n'}), 1,
           'src/high/high.cpp:1: includes "high/gone.h", not in the tree')
    return 0


if __name__ == "__main__":
    sys.exit(main())
