#!/usr/bin/env python3
"""The include layering of docs/architecture.md, checked against the tree.

Reads the fenced block of the section "Rules the suite checks" in docs/architecture.md (layers as
file patterns, what each may include, "never" and "only" rules, known exceptions), scans every
#include of the tracked C++ files under include/, src/ and tools/, and prints each include the
rules forbid as `file:line: includes X (layer A may not include layer B: rule)`. Fails on such an
include unless it is a known exception, on a known exception that no longer occurs (the list only
shrinks), and on a file that no layer names (a new folder must be placed).

  check_layering.py [--root DIR]          check; exit 1 on any finding
  check_layering.py [--root DIR] --list   each file with its layer
"""

import argparse
import functools
import os
import re
import subprocess
import sys

DOC = "docs/architecture.md"
SECTION = "## Rules the suite checks"
SCANNED = ("include", "src", "tools")
CPP_SUFFIXES = (".h", ".hpp", ".cpp", ".cc", ".cxx", ".inc", ".ipp")
# As target_include_directories in src/CMakeLists.txt: the public headers, then the sources.
INCLUDE_DIRS = ("include", "src")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
# protoc writes <build>/generated/proto/NAME.pb.h (an include directory of the summary library)
# from proto/NAME.proto: the .proto stands for the generated header.
GENERATED = re.compile(r"^(proto/.+)\.pb\.h$")


def is_pattern(spec):
    """A path pattern, as opposed to a layer's name."""
    return any(c in spec for c in "/*<.")


@functools.lru_cache(maxsize=None)
def glob_regex(pattern):
    parts = re.split(r"(\*\*|\*)", pattern)
    body = "".join(".*" if p == "**" else "[^/]*" if p == "*" else re.escape(p) for p in parts)
    return re.compile(body + r"\Z")


class Rules:
    """The block's rules; each line is one, a line starting with '#' a comment."""

    def __init__(self, root):
        with open(os.path.join(root, DOC), encoding="utf-8") as f:
            lines = f.read().split("\n")
        try:
            start = lines.index(SECTION)
            fence = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("```"))
            end = next(i for i in range(fence + 1, len(lines)) if lines[i].startswith("```"))
        except (ValueError, StopIteration):
            sys.exit(f"{DOC}: no fenced block under '{SECTION}'")
        self.layers = []  # (name, [pattern], external: matches includes written <...>)
        self.allows = {}  # layer: the layers it may include besides itself
        self.nevers = []  # (from specs, to specs, why); a spec is a layer or a pattern
        self.onlys = []  # (to specs, from specs, why)
        self.exceptions = []  # [file, included, why, where, seen]
        for number in range(fence + 2, end + 1):
            line = lines[number - 1].strip()
            if line and not line.startswith("#"):
                self.parse(line, f"{DOC}:{number}")
        names = {name for name, _, _ in self.layers}
        specs = [s for rule in self.nevers + self.onlys for s in rule[0] + rule[1]]
        for spec in specs + list(self.allows) + [n for a in self.allows.values() for n in a]:
            if not is_pattern(spec) and spec not in names:
                sys.exit(f"{DOC}: '{spec}' is neither a layer nor a pattern")

    def parse(self, line, where):
        head, _, why = line.partition(": ")
        if not why and line.endswith(":"):  # a layer that may include nothing else
            head = line[:-1]
        words = head.split() or [""]
        if len(words) == 2 and words[0] == "layer":
            patterns = why.split()
            external = all(p.startswith("<") for p in patterns)
            self.layers.append((words[1], [glob_regex(p) for p in patterns], external))
        elif words[1:] == ["may", "include"]:
            self.allows[words[0]] = why.split()
        elif words[0] == "never" and "->" in words and why:
            arrow = words.index("->")
            self.nevers.append((words[1:arrow], words[arrow + 1:], why))
        elif words[0] == "only" and "from" in words and why:
            at = words.index("from")
            self.onlys.append((words[1:at], words[at + 1:], why))
        elif len(words) == 4 and words[0] == "exception" and words[2] == "->" and why:
            self.exceptions.append([words[1], words[3], why, where, False])
        else:
            sys.exit(f"{where}: cannot read the rule (or it says no why): {line}")


def source_files(root):
    """The C++ files under SCANNED that git tracks; all of them when root is not a checkout."""
    try:
        top = subprocess.run(["git", "-C", root, "rev-parse", "--show-toplevel"],
                             capture_output=True, text=True)
        tracked = top.returncode == 0 and os.path.samefile(top.stdout.strip(), root)
    except OSError:
        tracked = False
    if tracked:
        listed = subprocess.run(["git", "-C", root, "ls-files", "-z", "--", *SCANNED],
                                capture_output=True, text=True, check=True).stdout.split("\0")
    else:
        listed = [os.path.relpath(os.path.join(d, f), root) for top in SCANNED
                  for d, _, files in os.walk(os.path.join(root, top)) for f in files]
    # A tracked file just deleted or moved away is no longer part of the tree.
    return sorted(p for p in set(listed)
                  if p.endswith(CPP_SUFFIXES) and os.path.isfile(os.path.join(root, p)))


class Checker:
    def __init__(self, root, rules):
        self.root, self.rules = root, rules
        self.includes_cache, self.reach_cache = {}, {}

    def layer_of(self, path):
        """The layer of a path from the root, or of an include written <...>; None if none."""
        external = path.startswith("<")
        hits = [n for n, patterns, ext in self.rules.layers
                if ext == external and any(p.match(path) for p in patterns)]
        if len(hits) > 1:
            raise ValueError(f"{path}: in layers {' and '.join(hits)}")
        if hits or external or not path.startswith("src/") or path.endswith((".h", ".hpp")):
            return hits[0] if hits else None
        # A source no pattern names: the layer of its header.
        stem = os.path.splitext(path[len("src/"):])[0]
        headers = (f"include/trainhooks/{stem}.h", f"src/{stem}.h")
        return next((self.layer_of(h) for h in headers if self.layer_of(h)), None)

    def resolve(self, includer, bracket, name):
        """The included file as a path from the root, '<name>' for another library's, or None."""
        dirs = ([os.path.dirname(includer)] if bracket == '"' else []) + list(INCLUDE_DIRS)
        for d in dirs:
            path = os.path.normpath(os.path.join(d, name))
            if os.path.isfile(os.path.join(self.root, path)):
                return path
        generated = GENERATED.match(name)
        if generated and os.path.isfile(os.path.join(self.root, generated[1] + ".proto")):
            return generated[1] + ".proto"
        return f"<{name}>" if bracket == "<" else None

    def includes(self, path):
        """(line number, include as written, resolved or None) of each #include of path."""
        if path not in self.includes_cache:
            found = []
            if path.endswith(CPP_SUFFIXES):
                with open(os.path.join(self.root, path), encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if m:
                            written = m[1] + m[2] + (">" if m[1] == "<" else '"')
                            found.append((number, written, self.resolve(path, m[1], m[2])))
            self.includes_cache[path] = found
        return self.includes_cache[path]

    def reach(self, path, visiting=()):
        """{external layer: (include, file that has it)} reached through path and its includes."""
        if path in self.reach_cache or path in visiting:
            return self.reach_cache.get(path, {})
        reached = {}
        for _, _, target in self.includes(path):
            if target is None:
                continue
            if target.startswith("<"):
                if self.layer_of(target):
                    reached.setdefault(self.layer_of(target), (target, path))
            else:
                for layer, how in self.reach(target, visiting + (path,)).items():
                    reached.setdefault(layer, how)
        self.reach_cache[path] = reached
        return reached

    def broken_rule(self, src, src_layer, dst, dst_layer, direct=True):
        """The text of the rule that src including dst breaks, or None."""

        def matches(specs, path, layer):
            return any(glob_regex(s).match(path) if is_pattern(s) else s == layer for s in specs)

        for froms, tos, why in self.rules.nevers:
            if matches(froms, src, src_layer) and matches(tos, dst, dst_layer):
                return why
        for tos, froms, why in self.rules.onlys if direct else ():
            if matches(tos, dst, dst_layer) and not matches(froms, src, src_layer):
                return why
        allowed = self.rules.allows.get(src_layer, [])
        if dst_layer is None or dst_layer == src_layer or dst_layer in allowed:
            return None
        return f"{src_layer} may include only " + (", ".join(allowed) or "itself")

    def reached_break(self, path, layer, target, written):
        """A library that layer may not include, reached through target: (why, library, what)."""
        for library, (include, via) in sorted(self.reach(target).items()):
            why = self.broken_rule(path, layer, include, library, direct=False)
            if why:
                return why, library, f"{written}, which reaches {include} in {via}"
        return None

    def check(self, files):
        """The findings, as printable lines; known exceptions are marked seen and left out."""
        findings = []
        for path in files:
            layer = self.layer_of(path)
            if layer is None:
                findings.append(f"{path}: in no layer of {DOC}: add its folder to one")
                continue
            for number, written, target in self.includes(path):
                if target is None:
                    findings.append(f"{path}:{number}: includes {written}, not in the tree")
                    continue
                target_layer = self.layer_of(target)
                why = self.broken_rule(path, layer, target, target_layer)
                found = (why, target_layer, written) if why else None
                if not why and not target.startswith("<"):
                    found = self.reached_break(path, layer, target, written)
                if found and not self.excepted(path, target):
                    why, target_layer, what = found
                    findings.append(f"{path}:{number}: includes {what} (layer {layer} may not "
                                    f"include layer {target_layer}: {why})")
        for file, included, _, where, seen in self.rules.exceptions:
            if not seen:
                findings.append(f"{where}: the known exception {file} -> {included} no longer "
                                "occurs: remove it (the list only shrinks)")
        return findings

    def excepted(self, path, target):
        hits = [e for e in self.rules.exceptions if e[0] == path and e[1] == target]
        for e in hits:
            e[4] = True
        return bool(hits)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(__file__), ".."))
    parser.add_argument("--list", action="store_true", help="print each file's layer")
    args = parser.parse_args()
    rules = Rules(args.root)
    checker = Checker(args.root, rules)
    files = source_files(args.root)
    try:
        if args.list:
            for path in files:
                print(f"{checker.layer_of(path) or '(no layer)':12} {path}")
            return 0
        findings = checker.check(files)
    except ValueError as e:
        print(f"check_layering: {e}", file=sys.stderr)
        return 1
    print("\n".join(findings + [""]), end="", flush=True)
    if findings:
        print(f"check_layering: {len(findings)} findings against {DOC}, section "
              f"'{SECTION[3:]}'", file=sys.stderr)
        return 1
    includes = sum(len(checker.includes(p)) for p in files)
    print(f"check_layering: {len(files)} files, {includes} includes, "
          f"{len(rules.exceptions)} known exceptions: as {DOC} says")
    return 0


if __name__ == "__main__":
    sys.exit(main())
