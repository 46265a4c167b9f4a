#!/usr/bin/env python3
"""Every C++ block of README.md and docs/*.md, as one translation unit the test build compiles.

A reader copies the documentation's code; this keeps that code compiling. Each ```cpp block
becomes a piece of one generated .cpp file, in a namespace of its own, wrapped according to the
HTML comment right before the block (invisible on a rendered page):

  <!-- snippet: program -->        a whole program or namespace-scope declarations (structs,
  <!-- snippet: declarations -->   functions, `main`), compiled as written
  <!-- snippet: statements(PARAMS) -->
                                   statements: the body of a function whose parameters PARAMS
                                   (C++, e.g. `th::Graph& g, th::Node loss`) are the names the
                                   text around the block has introduced
  <!-- snippet: expressions(PARAMS) -->
                                   expressions written without a `;`, one per line or spread over
                                   lines in brackets (a constructor as a reference shows it):
                                   each is compiled as a discarded expression in such a function
  <!-- snippet: KIND ... with: DECLARATIONS -->
                                   DECLARATIONS (C++) come first in the block's namespace: types
                                   and functions the text assumes (`double lr_now();`)
  <!-- snippet: skip: REASON -->   not compiled: a deliberately partial block (a synopsis of
                                   signatures); the reason is required

Without a comment, a block that defines `main` is a program and any other block is statements
without parameters. A block may assume what a program of the documentation's reader has: the
umbrella header trainhooks.h, <torch/torch.h>, the standard library and `namespace th =
trainhooks;`; headers beyond those (trainhooks/data.h, the test doubles, GoogleTest) it includes
itself. Every `#include` of a block moves to the top of the file, and
`#line` directives make the compiler's errors name the Markdown file and line. A block may only
include installed headers (the board's are not). An unclosed fence, an unknown kind, a skip
without a reason and an untagged block that reads as C++ are errors, so that no block escapes.

  doc_snippets.py --source-dir DIR --output FILE DOC...   write FILE (only when it changes)
  doc_snippets.py --source-dir DIR --check DOC...         parse and wrap, print what is compiled
  doc_snippets.py --self-test                             the parser and wrappers on examples
"""

import argparse
import os
import re
import sys
from dataclasses import dataclass, field
from typing import List, Optional

CPP_LANGS = {"cpp", "c++", "cxx"}
KINDS = {"program", "declarations", "statements", "expressions", "skip"}
# What a block may assume without including it.
PRELUDE = """\
#include <torch/torch.h>
#include <trainhooks/trainhooks.h>

#include <cmath>
#include <cstdint>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>
"""
# Headers under include/trainhooks that `make install` leaves out (CMakeLists.txt).
NOT_INSTALLED = ("trainhooks/board/",)
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<ticks>`{3,}|~{3,})\s*(?P<lang>[^\s`]*)\s*$")
MARKER = re.compile(r"<!--\s*snippet:(?P<body>.*?)-->", re.S)
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"](?P<path>[^>"]+)[>"]')
MAIN = re.compile(r"\bint\s+main\s*\(")
# An untagged block with any of these is C++ that would escape the compile.
LOOKS_LIKE_CPP = re.compile(r"\bth::|^\s*#\s*include\s*[<\"]|\bnamespace\s+\w+\s*=", re.M)


class DocError(Exception):
    pass


@dataclass
class Block:
    path: str  # as shown in errors: relative to the source directory
    line: int  # of the first content line, 1-based
    lang: str
    lines: List[str]
    marker: Optional[str] = None  # the marker comment's body
    marker_line: int = 0
    kind: str = ""
    params: str = ""
    context: str = ""
    reason: str = ""


@dataclass
class Result:
    blocks: List[Block] = field(default_factory=list)
    compiled: List[Block] = field(default_factory=list)
    skipped: List[Block] = field(default_factory=list)


def parse_blocks(path: str, text: str) -> List[Block]:
    """The fenced blocks of a Markdown file, with the snippet marker right before each."""
    lines = text.split("\n")
    blocks: List[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, ticks, lang = m.group("indent"), m.group("ticks"), m.group("lang").lower()
        start = i
        body = []
        i += 1
        while i < len(lines):
            close = re.match(r"^[ \t]*(`{3,}|~{3,})\s*$", lines[i])
            if close and close.group(1)[0] == ticks[0] and len(close.group(1)) >= len(ticks):
                break
            line = lines[i]
            body.append(line[len(indent):] if line.startswith(indent) else line.lstrip(" \t"))
            i += 1
        else:
            raise DocError(f"{path}:{start + 1}: the block opened here is never closed")
        block = Block(path=path, line=start + 2, lang=lang, lines=body)
        find_marker(block, lines, start)
        blocks.append(block)
        i += 1
    return blocks


def find_marker(block: Block, lines: List[str], fence: int) -> None:
    """The `<!-- snippet: ... -->` comment ending on the last non-blank line before the fence."""
    j = fence - 1
    while j >= 0 and not lines[j].strip():
        j -= 1
    if j < 0 or not lines[j].rstrip().endswith("-->"):
        return
    end = j
    while j >= 0 and "<!--" not in lines[j]:
        j -= 1
    if j < 0:
        return
    comment = "\n".join(lines[j:end + 1])
    m = MARKER.search(comment)
    if m:
        block.marker = m.group("body").strip()
        block.marker_line = j + 1


def read_params(text: str, where: str):
    """`(PARAMS)` at the start of text, brackets balanced: (params, rest)."""
    if not text.startswith("("):
        return "", text
    depth = 0
    for k, c in enumerate(text):
        depth += c in "([{<"
        depth -= c in ")]}>"
        if depth == 0:
            return text[1:k].strip(), text[k + 1:]
    raise DocError(f"{where}: unbalanced parameter list in the snippet marker")


def classify(block: Block) -> None:
    where = f"{block.path}:{block.marker_line or block.line}"
    if block.marker is None:
        code = "\n".join(block.lines)
        block.kind = "program" if MAIN.search(code) else "statements"
        return
    m = re.match(r"(\w+)", block.marker)
    if not m or m.group(1) not in KINDS:
        raise DocError(f"{where}: unknown snippet kind in '<!-- snippet: {block.marker} -->'; "
                       f"one of: {', '.join(sorted(KINDS))}")
    block.kind = m.group(1)
    rest = block.marker[m.end():].strip()
    if block.kind == "skip":
        block.reason = rest.lstrip(":").strip()
        if not block.reason:
            raise DocError(f"{where}: 'snippet: skip' needs a reason ('<!-- snippet: skip: why "
                           f"this block is partial -->')")
        return
    if rest.startswith("("):
        if block.kind not in ("statements", "expressions"):
            raise DocError(f"{where}: only statements and expressions take parameters")
        block.params, rest = read_params(rest, where)
        rest = rest.strip()
    if rest:
        w = re.match(r";?\s*with:(.*)", rest, re.S)
        if not w:
            raise DocError(f"{where}: cannot read '{rest}' in the snippet marker (expected "
                           f"'with: DECLARATIONS')")
        block.context = w.group(1).strip()


def strip_code(line: str, state: dict) -> str:
    """The line without comments and literals (state carries an open /* */ across lines)."""
    out = []
    k = 0
    while k < len(line):
        if state.get("comment"):
            end = line.find("*/", k)
            if end < 0:
                return "".join(out)
            state["comment"] = False
            k = end + 2
            continue
        c = line[k]
        if line.startswith("//", k):
            break
        if line.startswith("/*", k):
            state["comment"] = True
            k += 2
            continue
        if c in "\"'":
            end = k + 1
            while end < len(line) and line[end] != c:
                end += 2 if line[end] == "\\" else 1
            k = end + 1
            out.append(" ")
            continue
        out.append(c)
        k += 1
    return "".join(out)


def split_expressions(block: Block):
    """(first line index, last line index) of each top-level expression, by bracket depth."""
    chunks = []
    depth = 0
    start = None
    state: dict = {}
    for k, line in enumerate(block.lines):
        code = strip_code(line, state)
        if start is None:
            if not code.strip():
                continue
            start = k
        depth += sum(code.count(c) for c in "([{") - sum(code.count(c) for c in ")]}")
        if depth < 0:
            raise DocError(f"{block.path}:{block.line + k}: unbalanced brackets")
        if depth == 0:
            chunks.append((start, k))
            start = None
    if start is not None:
        raise DocError(f"{block.path}:{block.line + start}: an expression that never closes")
    return chunks


def line_directive(line: int, path: str) -> str:
    return f'#line {line} "{path}"'


def wrap(block: Block, index: int, includes: dict) -> str:
    """The block's piece of the generated file; its #includes go to includes (path -> line)."""
    body = []
    for k, line in enumerate(block.lines):
        m = INCLUDE.match(line)
        if m:
            if m.group("path").startswith(NOT_INSTALLED):
                raise DocError(f"{block.path}:{block.line + k}: '{m.group('path')}' is not "
                               f"installed (make install leaves the board's headers out)")
            if m.group("path") not in includes:
                includes[m.group("path")] = "\n".join(
                    [line_directive(block.line + k, block.path), line.strip()])
            body.append("")  # keeps the lines below at their numbers
        else:
            body.append(line)
    name = re.sub(r"\W", "_", block.path)
    out = [f"namespace doc_{name}_{block.line} {{", "namespace th = trainhooks;"]
    if block.context:
        out += [line_directive(block.marker_line, block.path), block.context]
    if block.kind in ("program", "declarations"):
        out += [line_directive(block.line, block.path)] + body
    elif block.kind == "statements":
        out += [f"[[maybe_unused]] void snippet_{index}({block.params}) {{",
                line_directive(block.line, block.path)] + body + ["}"]
    else:
        out.append(f"[[maybe_unused]] void snippet_{index}({block.params}) {{")
        for first, last in split_expressions(block):
            out += ["(void)(", line_directive(block.line + first, block.path)]
            out += body[first:last + 1] + [");"]
        out.append("}")
    out.append(f"}}  // namespace doc_{name}_{block.line}")
    return "\n".join(out)


def process(docs) -> Result:
    """docs: (path shown in errors, text) pairs."""
    result = Result()
    for path, text in docs:
        for block in parse_blocks(path, text):
            if block.lang in CPP_LANGS:
                classify(block)
                result.blocks.append(block)
                (result.skipped if block.kind == "skip" else result.compiled).append(block)
            elif not block.lang and LOOKS_LIKE_CPP.search("\n".join(block.lines)):
                raise DocError(f"{path}:{block.line - 1}: this block reads as C++ but is not "
                               f"tagged: open it with ```cpp so that it is compiled")
            elif block.marker is not None:
                raise DocError(f"{path}:{block.marker_line}: a snippet marker before a block "
                               f"that is not C++ (```{block.lang})")
    return result


def generate(docs) -> str:
    result = process(docs)
    includes: dict = {}
    pieces = [wrap(b, k, includes) for k, b in enumerate(result.compiled)]
    head = ["// Generated by tests/docs/doc_snippets.py from the C++ blocks of README.md and",
            "// docs/*.md; do not edit. Each block is in a namespace of its own.", PRELUDE]
    return "\n".join(head + list(includes.values()) + [""] + pieces) + "\n"


def read_docs(source_dir: str, paths):
    docs = []
    for p in paths:
        full = os.path.abspath(p)
        try:
            with open(full, encoding="utf-8") as f:
                docs.append((os.path.relpath(full, os.path.abspath(source_dir)), f.read()))
        except OSError as e:
            raise DocError(f"cannot read {p}: {e.strerror}")
    return docs


def write_if_changed(path: str, content: str) -> None:
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == content:
                return
    except FileNotFoundError:
        pass
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(content)
    os.replace(tmp, path)


def self_test() -> int:
    failures = []

    def expect(cond, what):
        if not cond:
            failures.append(what)

    def error_of(md):
        try:
            generate([("t.md", md)])
        except DocError as e:
            return str(e)
        return ""

    md = "\n".join([
        "# T", "",
        "<!-- snippet: statements(th::Graph& g) -->",
        "```cpp",
        "#include <trainhooks/idx_source.h>",
        "auto x = g.placeholder(\"x\", {});",
        "```", "",
        "<!-- snippet: expressions(th::Graph& g) with: double lr_now(); -->",
        "```cpp",
        "th::StopAtStepHook({.num_steps = 10})   // relative",
        "th::CheckpointSaverHook(\"d\", {.save_steps = 1,",
        "                              .checkpoint_basename = \"n)\"})",
        "```", "",
        "```cpp",
        "int main() { return 0; }",
        "```", "",
        "<!-- snippet: skip: a synopsis -->",
        "```cpp",
        "Foo(Bar)",
        "```", "",
        "- a list:", "",
        "  ```cpp",
        "  int y = 1;",
        "  ```",
        "",
    ])
    out = generate([("t.md", md)])
    result = process([("t.md", md)])
    expect([b.kind for b in result.blocks] == ["statements", "expressions", "program", "skip",
                                               "statements"], "kinds")
    expect(result.skipped[0].reason == "a synopsis", "skip reason")
    expect('#line 5 "t.md"\n#include <trainhooks/idx_source.h>\n' in out.split("namespace doc_")[0],
           "includes hoisted above the snippets, at their lines")
    expect("void snippet_0(th::Graph& g) {\n#line 5 \"t.md\"\n\nauto x" in out,
           "statements wrapped, #line at the first content line, the include line blanked")
    expect('#line 9 "t.md"\ndouble lr_now();' in out, "context at the marker's line")
    expect('(void)(\n#line 11 "t.md"\nth::StopAtStepHook({.num_steps = 10})   // relative\n);'
           in out, "one expression per line")
    expect('(void)(\n#line 12 "t.md"\nth::CheckpointSaverHook("d", {.save_steps = 1,\n'
           '                              .checkpoint_basename = "n)"})\n);' in out,
           "an expression over two lines, a bracket inside a string ignored")
    expect('#line 17 "t.md"\nint main() { return 0; }' in out, "a program as written")
    expect("Foo(Bar)" not in out, "a skipped block is left out")
    expect('#line 28 "t.md"\nint y = 1;' in out, "an indented block, its indentation removed")

    expect("never closed" in error_of("```cpp\nint x;\n"), "unclosed fence")
    expect("never closed" in error_of("```cpp\nint x;\n~~~\n"), "a fence closed by another kind")
    expect('#line 2 "t.md"\nint z;' in generate([("t.md", "~~~cpp\nint z;\n~~~\n")]),
           "a tilde fence")
    expect("needs a reason" in error_of("<!-- snippet: skip -->\n```cpp\nx\n```\n"),
           "skip without a reason")
    expect("unknown snippet kind" in error_of("<!-- snippet: fragment -->\n```cpp\nx\n```\n"),
           "unknown kind")
    expect("not tagged" in error_of("```\nth::Graph g;\n```\n"), "untagged C++")
    expect(error_of("```\nINFO:trainhooks:Saving checkpoints for 0\n```\n") == "",
           "untagged log output is fine")
    expect("not installed" in error_of("```cpp\n#include <trainhooks/board/report.h>\n```\n"),
           "board header")
    expect("never closes" in error_of("<!-- snippet: expressions -->\n```cpp\nf(1,\n```\n"),
           "an unclosed expression")
    expect("not C++" in error_of("<!-- snippet: statements -->\n```sh\nls\n```\n"),
           "a marker before a shell block")
    for f in failures:
        print(f"doc_snippets self-test FAILED: {f}", file=sys.stderr)
    if not failures:
        print("doc_snippets self-test: all checks passed")
    return 1 if failures else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source-dir", default=".")
    parser.add_argument("--output")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--self-test", action="store_true")
    parser.add_argument("docs", nargs="*")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    if not args.docs or not (args.output or args.check):
        parser.error("give DOC files and --output FILE or --check")
    try:
        docs = read_docs(args.source_dir, args.docs)
        content = generate(docs)
        result = process(docs)
    except DocError as e:
        print(f"doc_snippets: {e}", file=sys.stderr)
        return 1
    if args.output:
        write_if_changed(args.output, content)
    if args.check:
        for b in result.skipped:
            print(f"skipped {b.path}:{b.line}: {b.reason}")
        print(f"doc_snippets: {len(result.compiled)} C++ blocks compiled, {len(result.skipped)} "
              f"skipped, in {len(docs)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
