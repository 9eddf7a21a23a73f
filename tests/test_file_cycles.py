# SPDX-License-Identifier: Apache-2.0
"""No two files of csrc/ and kernels/ lean on each other, directly or round a longer
circle (issue 24): what both sides of such a circle need belongs in a file of its own.

The graph's nodes are units: a file x.c (or .cu, .cpp) and its own x.h in the same
folder are one unit; a header with no source of its name is a unit of its own.  Unit
A depends on unit B when a file of A includes a header of B, or when a source file of
A names a function or table that a source file of B defines (external linkage) - the
second catches a circle hidden behind one header that declares the functions of
several files.  A header's own text only adds its includes: its prototypes name what
others define, and its inline helpers here call nothing defined in another unit.

``python tests/test_file_cycles.py [ROOT]`` prints every cycle of a checkout.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = {".c", ".cu", ".cpp"}
HEADERS = {".h", ".cuh"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
# Comments out, string and character literals emptied (so `extern "C"` and messages name nothing).
NOISE = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.DOTALL)
# The project's style puts a function's name at the start of its line, under its return type.
FUNCTION = re.compile(r"^([^\s#}{;/][^;{}()=#]*)\n([A-Za-z_]\w*)\s*\(", re.MULTILINE)
# A table or variable defined at file level: `const ckc_named_code ckc_codes[] = {`.
DATA = re.compile(r"^(?!static\b|typedef\b|extern\b|#)[A-Za-z_][\w \t*]*?\b([A-Za-z_]\w*)\s*(?:\[[^\]\n]*\])?\s*=",
                  re.MULTILINE)
IDENT = re.compile(r"[A-Za-z_]\w*")


def _blank(match: re.Match) -> str:
    text = match.group(0)
    if text.startswith(("/", )):
        return " " + "\n" * text.count("\n")
    return '""'


def code_of(text: str) -> str:
    return NOISE.sub(_blank, text)


def files(root: Path) -> list[Path]:
    return sorted(p for top in ("csrc", "kernels") for p in (root / top).rglob("*")
                  if p.suffix in SOURCES | HEADERS)


def unit(root: Path, path: Path) -> str:
    return path.relative_to(root).with_suffix("").as_posix()


def definitions(code: str) -> set[str]:
    """Names a source file defines with external linkage."""
    names = {name for ret, name in FUNCTION.findall(code) if not re.search(r"\bstatic\b", ret)}
    return names | {name for name in DATA.findall(code)}


def graph(root: Path) -> dict[str, dict[str, str]]:
    """unit -> {unit it depends on: why (the first include or name seen)}."""
    root = root.resolve()
    texts = {p: code_of(p.read_text(errors="replace")) for p in files(root)}
    defined: dict[str, set[str]] = {}
    for path, code in texts.items():
        if path.suffix in SOURCES:
            for name in definitions(code):
                defined.setdefault(name, set()).add(unit(root, path))
    edges: dict[str, dict[str, str]] = {}
    for path, code in texts.items():
        me = unit(root, path)
        out = edges.setdefault(me, {})
        raw = path.read_text(errors="replace")
        for name in INCLUDE.findall(raw):
            found = next((c for c in (path.parent / name, root / "csrc" / name, root / "kernels" / name)
                          if c.is_file()), None)
            if found is not None and unit(root, found.resolve()) != me:
                out.setdefault(unit(root, found.resolve()), f'{path.relative_to(root).as_posix()} includes "{name}"')
        if path.suffix in SOURCES:
            # A file's own definitions are not a use (runtime_cuda.c and runtime_emu.c define
            # the same functions: each serves one build, neither uses the other).
            for name in sorted((set(IDENT.findall(code)) & defined.keys()) - definitions(code)):
                for other in sorted(defined[name] - {me}):
                    out.setdefault(other, f"{path.relative_to(root).as_posix()} uses {name}")
    return edges


def cycles(edges: dict[str, dict[str, str]]) -> list[tuple[list[str], list[str]]]:
    """(a shortest cycle, all its units) of each strongly connected component of more than
    one unit (Tarjan): the cycle says which way each step goes, the units what else is caught."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    comps: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    sys.setrecursionlimit(max(10000, sys.getrecursionlimit()))
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return [(_walk(edges, comp), comp) for comp in comps]


def _walk(edges: dict[str, dict[str, str]], comp: list[str]) -> list[str]:
    """A shortest cycle through comp's first unit, staying inside comp."""
    start, inside = comp[0], set(comp)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(edges.get(v, {})):
                if w == start:
                    return paths[v] + [start]
                if w in inside and w not in paths:
                    paths[w] = paths[v] + [w]
                    nxt.append(w)
        frontier = nxt
    return comp


def describe(edges: dict[str, dict[str, str]], cycle: list[str], comp: list[str]) -> str:
    steps = [f"  {a} -> {b}: {edges[a][b]}" for a, b in zip(cycle, cycle[1:])]
    rest = sorted(set(comp) - set(cycle))
    more = f"\n  (in the same knot: {', '.join(rest)})" if rest else ""
    return " -> ".join(cycle) + "\n" + "\n".join(steps) + more


def test_no_file_cycles():
    edges = graph(ROOT)
    found = [describe(edges, c, comp) for c, comp in cycles(edges)]
    assert not found, "files that depend on each other (put what both need in a file of its own):\n" + \
        "\n".join(found)


def test_graph_sees_the_tree():
    """The parsing finds what it must, so a silent regex cannot pass the check above."""
    edges = graph(ROOT)
    assert len(edges) > 50
    assert any("uses ckc_" in why for out in edges.values() for why in out.values())
    assert any("includes" in why for out in edges.values() for why in out.values())


def test_planted_cycles_fail(tmp_path):
    """A circle through one shared header (a.c and b.c each call the other's function,
    both declared in both.h), and a plain include circle (x.h <-> y.h)."""
    d = tmp_path / "csrc" / "m"
    d.mkdir(parents=True)
    (tmp_path / "kernels").mkdir()
    (d / "both.h").write_text("int ckc_a(void);\nint ckc_b(void);\n")
    (d / "a.c").write_text('#include "both.h"\n/* ckc_zzz in a comment names nothing */\n'
                           "int\nckc_a(void)\n{\n    return ckc_b();\n}\n")
    (d / "b.c").write_text('#include "both.h"\nstatic int\nhelper(void)\n{\n    return 1;\n}\n'
                           "int\nckc_b(void)\n{\n    return ckc_a() + helper();\n}\n")
    (d / "x.h").write_text('#include "y.h"\n')
    (d / "y.h").write_text('#include "x.h"\n')
    (d / "lone.c").write_text('static const char *s = "ckc_a(";\n')
    found = [c for c, _ in cycles(graph(tmp_path))]
    assert sorted(found) == [["csrc/m/a", "csrc/m/b", "csrc/m/a"], ["csrc/m/x", "csrc/m/y", "csrc/m/x"]]


if __name__ == "__main__":
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT
    g = graph(root)
    for c, comp in cycles(g):
        print(describe(g, c, comp))
