# SPDX-License-Identifier: Apache-2.0
"""No logic written twice in production code (issue 24), by tools/find_duplicates.py.

Fails on any pair of places sharing six or more identical lines, and on any same-shape pair
that docs/architecture.md does not list with its reason; a listed pair that no longer exists
fails too, so the document and the code cannot drift apart.
"""
from __future__ import annotations

import importlib.util
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ALLOWLIST = ROOT / "docs" / "architecture.md"

_spec = importlib.util.spec_from_file_location("find_duplicates", ROOT / "tools" / "find_duplicates.py")
finder = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = finder  # dataclasses look their module up there
_spec.loader.exec_module(finder)

ROW = re.compile(r"^\|([^|]+)\|([^|]+)\|\s*`([^`]+)`\s*~\s*`([^`]+)`([^|]*)\|([^|]*)\|\s*$")


SECTION = "## Same-shape code kept on purpose"


def allowlist(text: str) -> dict[tuple[str, str, str, str], str]:
    """(file, name, file, name) -> why, of each row of the table under SECTION (files and
    names in the finder's order; the whole text when it has no such heading, so the section
    may live in a larger document); a row that does not parse is an error, not a skip."""
    if SECTION in text:
        text = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in text.splitlines():
        if not line.startswith("|") or set(line) <= set("|-: ") or line.startswith("| file |"):
            continue
        m = ROW.match(line)
        assert m, f"docs/architecture.md: a row must read | file | file | `a` ~ `b`: what | why |: {line}"
        fa, fb, na, nb, what, why = (g.strip() for g in m.groups())
        assert why and what.lstrip(":").strip(), f"docs/architecture.md: say what the pair is and why: {line}"
        key = tuple(x for side in sorted([(fa, na), (fb, nb)]) for x in side)
        assert key not in rows, f"docs/architecture.md: listed twice: {line}"
        rows[key] = why
    return rows


def test_no_identical_lines_twice():
    pairs = finder.find(ROOT)
    assert not pairs, "the same lines in two places (write the logic once):\n" + "\n".join(map(str, pairs))


def test_same_shape_pairs_are_the_listed_ones():
    found = {p.key: p for p in finder.find(ROOT, shape=True)}
    listed = allowlist(ALLOWLIST.read_text())
    new = [str(found[k]) for k in sorted(found.keys() - listed.keys())]
    gone = [" ~ ".join(f"{f}:{n}" for f, n in zip(k[::2], k[1::2])) for k in sorted(listed.keys() - found.keys())]
    assert not new, ("same-shape pairs docs/architecture.md does not list (deduplicate, or list the pair with why "
                     "it is clearer written out):\n" + "\n".join(new))
    assert not gone, "docs/architecture.md lists pairs that are gone (remove the rows):\n" + "\n".join(gone)


def test_the_finder_is_fast():
    start = time.perf_counter()
    finder.find(ROOT)
    finder.find(ROOT, shape=True)
    assert time.perf_counter() - start < 10


def test_planted_copies_are_found(tmp_path):
    """Six lines copied, six of the same shape, and what must not count: five lines, a
    copy in comments, a list of alike lines overlapping itself, declarations by shape."""
    body = ["    int a = f(x, 1);", "    int b = g(a, 2);", "    if (a > b) {", "        a = b;", "    }",
            "    h(a, b);", "    return a + b;"]
    shaped = [line.replace("a", "p").replace("b", "q").replace("1", "7") for line in body]
    (tmp_path / "csrc").mkdir()
    (tmp_path / "kernels").mkdir()
    (tmp_path / "csrc" / "one.c").write_text("int\nfirst(int x)\n{\n" + "\n".join(body) + "\n}\n"
                                             "/*\n" + "\n".join(body) + "\n*/\n")
    (tmp_path / "csrc" / "two.c").write_text("static int\nsecond(int x)\n{\n" + "\n".join(body) + "\n}\n"
                                             "int\nthird(int x)\n{\n" + "\n".join(shaped) + "\n}\n"
                                             "int\nshort_one(int x)\n{\n" + "\n".join(body[:5]) + "\n}\n")
    (tmp_path / "csrc" / "list.c").write_text(
        "void\nlist(void)\n{\n" + "\n".join(f"    put(t, {k}, \"n{k}\");" for k in range(12)) + "\n}\n"
        "enum { A = 1, B = 2, C = 3, D = 4, E = 5, F = 6 };\n"
        + "\n".join(f"int v{k} = {k};" for k in range(8)) + "\n")
    identical = [(p.a, p.a_name, p.b, p.b_name) for p in finder.find(tmp_path)]
    assert identical == [("csrc/one.c", "first", "csrc/two.c", "second")]
    shape = sorted((p.a, p.a_name, p.b, p.b_name) for p in finder.find(tmp_path, shape=True))
    assert shape == [("csrc/one.c", "first", "csrc/two.c", "third"), ("csrc/two.c", "second", "csrc/two.c", "third")]


def test_the_allowlist_parser_refuses_a_bad_row():
    good = "| a.c | b.c | `f` ~ `g`: a pair | a reason |\n"
    assert allowlist(good) == {("a.c", "f", "b.c", "g"): "a reason"}
    other = "| x | y |\n|---|---|\n| another | table |\n"
    document = f"# Doc\n{other}\n{SECTION}\n\n| file | file |\n|---|---|\n{good}\n## Next\n{other}"
    assert allowlist(document) == {("a.c", "f", "b.c", "g"): "a reason"}
    for bad in ("| a.c | b.c | f ~ g: no backticks | a reason |\n", "| a.c | b.c | `f` ~ `g`: a pair |  |\n"):
        try:
            allowlist(bad)
        except AssertionError:
            continue
        raise AssertionError(f"accepted {bad!r}")
