# SPDX-License-Identifier: Apache-2.0
"""Finds the places of production code that repeat each other (issue 24).

Reads csrc/, kernels/, comfy_kitchen_c/ and setup.py.  Each line is normalised: white space
stripped; blank lines, comments, lone punctuation (``}``, ``});``) and include/import lines
dropped, since they say nothing about the logic.  Then it reports every pair of places that
share a run of at least --min-lines (6) lines:

  identical    the same lines, to the letter;
  shape        lines of the same shape: identifiers, numbers and strings replaced by
               placeholders, keywords and punctuation kept (so ``a[i] = f(b, 3);`` and
               ``x[k] = g(y, 4);`` match); only pairs not already identical.  Only lines of
               function bodies count (declarations, tables, enums and macros have shapes of
               their own), and a run made of fewer than three distinct shapes is a list of
               alike lines (a row of calls, of assignments), not a copy of logic.

A place is a file and the function (or, outside functions, the first name) its run starts
in, so a pair keeps its name when the lines around it move: ``<file>:<function> ~ <file>:<function>``.
A shape that recurs in more than COMMON (8) places is a pattern of the language, not a
copy, and is left out (counted on stderr).  tests/test_duplicates.py fails on any identical
pair and on any shape pair not named in docs/architecture.md.

``python tools/find_duplicates.py [--shape] [--root DIR]`` prints one pair a line.
"""
from __future__ import annotations

import argparse
import keyword
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCTION = ("csrc", "kernels", "comfy_kitchen_c")
C_SUFFIXES = {".c", ".h", ".cu", ".cuh", ".cpp"}
MIN_LINES = 6
COMMON = 8
LIST_SHAPES = 3  # a shape run of fewer distinct line shapes is a list (calls, assignments), not a copy

C_NOISE = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.DOTALL)
PUNCTUATION = re.compile(r"^[\s{}()\[\];,:]*$")
SKIPPED = re.compile(r"^(#\s*include\b|import\s|from\s+\S+\s+import\s)")
TOKEN = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|[A-Za-z_]\w*|\d[\w.]*|\S')
C_KEYWORDS = set("""auto break case char const continue default do double else enum extern float for goto
if inline int long register restrict return short signed sizeof static struct switch typedef union
unsigned void volatile while _Bool _Static_assert bool true false NULL nullptr template typename
class namespace using new delete __global__ __device__ __host__ __shared__ __forceinline__""".split())
KEYWORDS = C_KEYWORDS | set(keyword.kwlist) | {"self", "None", "True", "False"}
C_FUNCTION = re.compile(r"^([A-Za-z_]\w*)\s*\(")
PY_FUNCTION = re.compile(r"^\s*(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)")
C_MACRO = re.compile(r"^#\s*define\s+([A-Za-z_]\w*)")


@dataclass(frozen=True)
class Line:
    number: int  # 1-based, in the file
    text: str    # normalised
    where: str   # the function (or macro, class) it stands in; "" at file level
    body: bool   # inside a function's body (only such lines are compared by shape)


@dataclass
class Pair:
    kind: str    # "identical" or "shape"
    a: str       # file
    a_lines: tuple[int, int]
    a_name: str
    b: str
    b_lines: tuple[int, int]
    b_name: str
    length: int  # normalised lines shared

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.a, self.a_name, self.b, self.b_name)

    def __str__(self) -> str:
        return (f"{self.kind} {self.length} lines: {self.a}:{self.a_lines[0]}-{self.a_lines[1]} ({self.a_name}) ~ "
                f"{self.b}:{self.b_lines[0]}-{self.b_lines[1]} ({self.b_name})")


def production_files(root: Path) -> list[Path]:
    files = [root / "setup.py"] if (root / "setup.py").is_file() else []
    for top in PRODUCTION:
        files += [p for p in (root / top).rglob("*")
                  if p.is_file() and (p.suffix in C_SUFFIXES or p.suffix == ".py")]
    return sorted(files)


def _blank_c(match: re.Match) -> str:
    text = match.group(0)
    if text.startswith("/"):
        return " " + "\n" * text.count("\n")  # a comment: gone, its lines kept
    return text


# What opens a block at file level that is no function body (a table, a type, a linkage block).
NOT_A_BODY = re.compile(r"=|\b(?:struct|enum|union|extern|namespace)\b")


def _braces(line: str, depth: int, in_body: bool, head: str) -> tuple[int, bool, str]:
    """The brace depth, whether in a function body, and the file-level text since the
    last statement, after line."""
    for k, ch in enumerate(line):
        if ch == "{":
            if depth == 0:
                in_body = not NOT_A_BODY.search(head + " " + line[:k])
            depth += 1
        elif ch == "}":
            depth = max(depth - 1, 0)
            if depth == 0:
                in_body, head = False, ""
        elif ch == ";" and depth == 0:
            head = ""
    if depth == 0 and "{" not in line and "}" not in line:
        head += " " + line
    return depth, in_body, head


def normalise(path: Path, text: str) -> list[Line]:
    """The file's lines that carry logic, each with the function it stands in."""
    is_c = path.suffix in C_SUFFIXES
    if is_c:
        text = C_NOISE.sub(_blank_c, text)
    out = []
    where = ""
    depth = 0           # C: brace depth
    in_body = False     # C: inside a function's body
    head = ""           # C: what stood at file level since the last statement or block
    macro = False       # C: on a continuation line of a #define
    for number, raw in enumerate(text.splitlines(), 1):
        line = " ".join(raw.split())
        if not is_c:
            line = line.split("  #")[0].rstrip() if "  #" in line else line
        found = (C_FUNCTION.match(raw) or C_MACRO.match(raw)) if is_c else PY_FUNCTION.match(raw)
        if found:
            where = found.group(1)
        if is_c:
            body = in_body and not macro
            directive = macro or line.startswith("#")
            macro = line.endswith("\\") and directive
            if not directive:
                depth, in_body, head = _braces(line, depth, in_body, head)
        else:
            body = raw[:1] in " \t" and where != ""
        if not line or PUNCTUATION.match(line) or SKIPPED.match(line) or (not is_c and line.startswith("#")):
            continue
        out.append(Line(number, line, where, body))
    return out


def shape_of(line: str) -> str:
    shaped = []
    for tok in TOKEN.findall(line):
        if tok[0] in "\"'":
            shaped.append("S")
        elif tok[0].isdigit():
            shaped.append("N")
        elif tok[0].isalpha() or tok[0] == "_":
            shaped.append(tok if tok in KEYWORDS else "I")
        else:
            shaped.append(tok)
    return " ".join(shaped)


def _runs(seqs: dict[str, list], min_lines: int, common: int | None, dropped: list[int]):
    """Maximal runs of >= min_lines equal items: (file a, start a, file b, start b, length)."""
    index: dict[tuple[str, ...], list[tuple[str, int]]] = {}
    for name, seq in seqs.items():
        for i in range(len(seq) - min_lines + 1):
            index.setdefault(tuple(seq[i:i + min_lines]), []).append((name, i))
    seen: set[tuple[str, int, str, int]] = set()
    for gram, places in index.items():
        if len(places) < 2:
            continue
        if common is not None and len(places) > common:
            dropped.append(len(places))
            continue
        for x in range(len(places)):
            for y in range(x + 1, len(places)):
                (fa, ia), (fb, ib) = places[x], places[y]
                if fa == fb and abs(ia - ib) < min_lines:
                    continue  # a run overlapping itself (a list of alike lines) is no copy
                sa, sb = seqs[fa], seqs[fb]
                while ia > 0 and ib > 0 and sa[ia - 1] == sb[ib - 1] and (fa != fb or ib - ia != 0):
                    ia, ib = ia - 1, ib - 1
                if (fa, ia, fb, ib) in seen:
                    continue
                seen.add((fa, ia, fb, ib))
                n = min_lines
                while ia + n < len(sa) and ib + n < len(sb) and sa[ia + n] == sb[ib + n] and \
                        (fa != fb or ia + n < ib):
                    n += 1
                yield fa, ia, fb, ib, n


def find(root: Path = ROOT, shape: bool = False, min_lines: int = MIN_LINES, common: int = COMMON,
         dropped: list[int] | None = None) -> list[Pair]:
    """Identical pairs, or (shape=True) the shape pairs that are not identical ones."""
    root = root.resolve()
    lines = {p.relative_to(root).as_posix(): normalise(p, p.read_text(errors="replace"))
             for p in production_files(root)}
    texts = {f: [ln.text for ln in ls] for f, ls in lines.items()}
    # By shape only function bodies count: declarations, tables and preprocessor lines
    # have shapes of their own, with no logic to share.  Each other line is a barrier that
    # matches nothing, so no run joins the end of one function to the start of the next.
    seqs = {f: [shape_of(ln.text) if ln.body and not ln.text.startswith("#") else (f, k) for k, ln in enumerate(ls)]
            for f, ls in lines.items()} if shape else texts
    dropped = [] if dropped is None else dropped
    pairs: dict[tuple[str, str, str, str], Pair] = {}
    for fa, ia, fb, ib, n in _runs(seqs, min_lines, common if shape else None, dropped):
        la, lb = lines[fa], lines[fb]
        if shape and _shares_identical(texts[fa][ia:ia + n], texts[fb][ib:ib + n], min_lines):
            continue  # the identical mode reports it
        if shape and len(set(seqs[fa][ia:ia + n])) < LIST_SHAPES:
            continue  # one or two shapes over and over: a list of alike facts, not logic written twice
        pair = Pair("shape" if shape else "identical", fa, (la[ia].number, la[ia + n - 1].number), _name(la, ia),
                    fb, (lb[ib].number, lb[ib + n - 1].number), _name(lb, ib), n)
        if (pair.a, pair.a_name) > (pair.b, pair.b_name):
            pair = Pair(pair.kind, pair.b, pair.b_lines, pair.b_name, pair.a, pair.a_lines, pair.a_name, n)
        old = pairs.get(pair.key)
        if old is None or n > old.length:
            pairs[pair.key] = pair
    return sorted(pairs.values(), key=lambda p: (-p.length, p.key))


def _shares_identical(a: list[str], b: list[str], min_lines: int) -> bool:
    same = 0
    for x, y in zip(a, b):
        same = same + 1 if x == y else 0
        if same >= min_lines:
            return True
    return False


def _name(lines: list[Line], i: int) -> str:
    """The place's name: its function, else the first name on its first line."""
    if lines[i].where:
        return lines[i].where
    first = re.search(r"[A-Za-z_]\w*", lines[i].text)
    return first.group(0) if first else f"line{lines[i].number}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", action="store_true", help="lines of the same shape (else: identical lines)")
    ap.add_argument("--root", type=Path, default=ROOT)
    ap.add_argument("--min-lines", type=int, default=MIN_LINES)
    args = ap.parse_args(argv)
    dropped: list[int] = []
    pairs = find(args.root, args.shape, args.min_lines, dropped=dropped)
    for p in pairs:
        print(p)
    print(f"{len(pairs)} {'shape' if args.shape else 'identical'} pairs", file=sys.stderr)
    if dropped:
        print(f"left out: {len(dropped)} runs that stand in more than {COMMON} places", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
