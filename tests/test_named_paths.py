# SPDX-License-Identifier: Apache-2.0
"""Every file a comment names is there (issue 24: comments kept naming files that had moved).

Read: the comments and docstrings of production code (csrc/, kernels/, comfy_kitchen_c/,
setup.py, benchmarks/, tools/) and the prose of the Markdown files (README.md, docs/,
benchmarks/README.md; csrc/README.md while it lasts).  Checked: each path written from the
repository root (``csrc/ops/route.c``, ``kernels/int8.cu``, ``tests/test_x.py``), and in C
comments also each path written from csrc/ as the includes are (``gpu/runtime.h``).  A glob
(``kernels/*.cu``) or a placeholder (``ops/<family>.c``) must match at least one file.

What it leaves alone, so that it never cries wolf: bare file names (``flight.h``: which
folder?), paths inside another path (``~/.cache/comfy_kitchen_c/flight``), string literals
of code (messages and real paths are the code's business, and its tests'), and in Markdown
the csrc-relative form, which there also names history (a "before" table).

``python tests/test_named_paths.py [ROOT]`` prints every stale mention of a checkout.
"""
from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOPS = ("csrc", "kernels", "comfy_kitchen_c", "tests", "benchmarks", "tools", "docs")
LAYERS = ("contract", "cpu", "diag", "emu", "gpu", "math", "module", "ops", "platform")
PRODUCTION = ("csrc", "kernels", "comfy_kitchen_c", "benchmarks", "tools")
C_SUFFIXES = {".c", ".h", ".cu", ".cuh", ".cpp"}
PROSE = ("README.md", "docs/*.md", "benchmarks/README.md", "csrc/README.md")
# Build outputs a comment may name: they exist only after a build.
BUILT = {"comfy_kitchen_c/_C.pyd"}

# Not preceded by a character that would make it part of a longer path or word.
_START = r"(?<![\w./~<>*-])"
ROOTED = re.compile(_START + r"((?:%s)/[\w./*<>-]*[\w*>/])" % "|".join(TOPS))
FROM_CSRC = re.compile(_START + r"((?:%s)/[\w*<>]+\.(?:c|h|cpp|cu|cuh))\b" % "|".join(LAYERS))
C_COMMENT = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.DOTALL)


def c_comments(text: str) -> list[tuple[int, str]]:
    """(line, text) of each comment (string literals are matched only to be skipped)."""
    return [(text.count("\n", 0, m.start()) + 1, m.group(0)) for m in C_COMMENT.finditer(text)
            if m.group(0).startswith("/")]


def py_comments(text: str) -> list[tuple[int, str]]:
    """(line, text) of each comment and docstring."""
    found = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                found.append((tok.start[0], tok.string))
        tree = ast.parse(text)
    except (SyntaxError, tokenize.TokenError):
        return found
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                found.append((body[0].lineno, body[0].value.value))
    return found


def exists(root: Path, token: str, bases: tuple[str, ...]) -> bool:
    pattern = re.sub(r"<[^<>/]+>", "*", token.rstrip("."))
    if pattern in BUILT:
        return True
    for base in bases:
        where = root / base if base else root
        if any(c in pattern for c in "*?["):
            if next(iter(where.glob(pattern.rstrip("/"))), None) is not None:
                return True
        elif (where / pattern).exists():
            return True
    return False


def mentions(root: Path, rel: str, text: str) -> list[tuple[int, str, tuple[str, ...]]]:
    """(line, token, folders it may be relative to) of each path the file names."""
    suffix = Path(rel).suffix
    if suffix == ".md":
        return [(text.count("\n", 0, m.start()) + 1, m.group(1), ("",)) for m in ROOTED.finditer(text)]
    pieces = c_comments(text) if suffix in C_SUFFIXES else py_comments(text)
    out = []
    for line, piece in pieces:
        for m in ROOTED.finditer(piece):
            out.append((line + piece.count("\n", 0, m.start()), m.group(1), ("",)))
        if suffix in C_SUFFIXES:
            for m in FROM_CSRC.finditer(piece):
                out.append((line + piece.count("\n", 0, m.start()), m.group(1), ("csrc", "kernels")))
    return out


def sources(root: Path) -> list[Path]:
    files = [root / "setup.py"] if (root / "setup.py").is_file() else []
    for top in PRODUCTION:
        files += [p for p in (root / top).rglob("*") if p.suffix in C_SUFFIXES | {".py"} and p.is_file()]
    for pattern in PROSE:
        files += [p for p in root.glob(pattern) if p.is_file()]
    return sorted(set(files))


def stale(root: Path) -> list[str]:
    bad = []
    for path in sources(root):
        rel = path.relative_to(root).as_posix()
        text = path.read_text(errors="replace")
        for line, token, bases in mentions(root, rel, text):
            if not exists(root, token, bases):
                where = " or ".join(f"{b}/" for b in bases if b) or "the root"
                bad.append(f"{rel}:{line}: names {token}, which is not in the tree (from {where})")
    return bad


def test_named_paths_exist():
    bad = stale(ROOT)
    assert not bad, "comments name files that are not there (moved or renamed?):\n" + "\n".join(bad)


def test_the_check_reads_the_tree():
    """It finds the mentions it must, so a regex gone blind cannot pass the check above."""
    named = {token for path in sources(ROOT)
             for _, token, _ in mentions(ROOT, path.relative_to(ROOT).as_posix(), path.read_text(errors="replace"))}
    assert {"csrc/contract/codes.h", "gpu/runtime.h"} <= named
    assert len(named) > 100


def test_planted_stale_mentions_fail(tmp_path):
    (tmp_path / "csrc" / "ops").mkdir(parents=True)
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "int8.cu").write_text("")
    (tmp_path / "comfy_kitchen_c").mkdir()
    (tmp_path / "docs").mkdir()
    (tmp_path / "csrc" / "ops" / "route.c").write_text(
        '/* Runs kernels/int8.cu and kernels/*.cu (kernels/<family>.cu), see ops/route.c;\n'
        ' * once csrc/ops/gone.c and math/gone.h. */\n'
        'static const char *s = "csrc/in/a/string.c"; // and csrc/ops/also_gone.c\n')
    (tmp_path / "comfy_kitchen_c" / "x.py").write_text(
        '"""Reads kernels/int8.cu and tests/test_gone.py."""\n'
        'PATH = "csrc/in/code.c"  # the cache: ~/.cache/comfy_kitchen_c/flight, docs/gone.md.\n')
    (tmp_path / "README.md").write_text("See `csrc/ops/route.c`, `benchmarks/gone.py` and `ops/history.h`.\n")
    bad = stale(tmp_path)
    named = sorted(line.split(": names ")[1].split(",")[0] for line in bad)
    assert named == ["benchmarks/gone.py", "csrc/ops/also_gone.c", "csrc/ops/gone.c", "docs/gone.md",
                     "math/gone.h", "tests/test_gone.py"], bad
    assert any(line.startswith("csrc/ops/route.c:2: names csrc/ops/gone.c") for line in bad), bad


if __name__ == "__main__":
    print("\n".join(stale(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else ROOT)) or "none stale")
