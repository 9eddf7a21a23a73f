# SPDX-License-Identifier: Apache-2.0
"""The corridor in the code (docs/architecture.md): every #include in csrc/ and kernels/
goes along the layers, and the Python package has no import cycle.

Each C file belongs to the layer of its folder; a quoted #include is resolved as the
compiler does (the including file's folder, then csrc/, the build's only include root)
and must land in a layer that the including layer may use (ALLOWED).  Where a layer may
reach a device layer at all, it does so through that device's public headers (GATES).
A quoted #include that climbs out of its folder ("../ops/op.h") or names an absolute path
is refused: through the including file's own folder it would reach any part whatever the
include path holds.  tests/test_include_paths.py checks the same table with the compiler:
each part preprocessed with only what it may use on its include path.
``python tests/test_layers.py [ROOT]`` prints the layer graph (edges with counts) of a
checkout, and the edges that break the rules.
"""
from __future__ import annotations

import ast
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Folder (relative to the root) -> layer; the longest matching prefix wins.
FOLDERS = {
    "csrc/math": "math",
    "csrc/emu": "emu",
    "kernels": "kernels",
    "csrc/platform": "platform",
    "csrc/contract": "contract",
    "csrc/cpu": "cpu",
    "csrc/gpu": "gpu",
    "csrc/diag": "diag",
    "csrc/ops": "ops",
    "csrc/module": "module",
}

# Layer -> the layers it may use: include directly, or see through the headers of the
# layers it includes (the compiler needs those folders on the part's include path too).
# From the bottom: the scalar math and the OS primitives include nothing of ours, nor does
# the emulated device (test code: built into _C_emu only); the contracts use only the
# math; the devices (CPU kernels, GPU runtime seam and launchers, the kernels) the
# contracts, the math and the OS, and the GPU side the emulated device; the diagnostics
# the GPU runtime seam; the op layer the devices and the diagnostics; the module (Python's
# face) the op layer and the diagnostics, and the contracts' math and the diagnostics' OS
# primitives it reads (codes.h's limits, flight.h's atomics).
ALLOWED = {
    "math": {"math"},
    "platform": {"platform"},
    "emu": {"emu"},
    "contract": {"contract", "math"},
    "cpu": {"cpu", "contract", "math", "platform"},
    "gpu": {"gpu", "contract", "math", "platform", "emu"},
    "kernels": {"kernels", "contract", "math", "gpu", "emu"},
    "diag": {"diag", "contract", "platform", "gpu"},
    "ops": {"ops", "contract", "math", "platform", "diag", "cpu", "gpu", "emu"},
    "module": {"module", "ops", "diag", "contract", "math", "platform"},
}

# (layer, used layer) -> the only headers of it that the layer may include.
GATES = {
    ("ops", "cpu"): {"csrc/cpu/cpu.h"},
    ("ops", "gpu"): {"csrc/gpu/gpu.h"},
    # The emulated device's fault and capture controls, which gpu.h hands on to the op
    # layer in the emulated build (ops/devices.c calls them for the module).
    ("ops", "emu"): {"csrc/emu/emu_api.h"},
    ("diag", "gpu"): {"csrc/gpu/runtime.h"},
    # What kernels and their C launchers agree on (argument structs, block shapes, the
    # instance lists); the kernels hold device code only and call nothing of the gpu layer.
    ("kernels", "gpu"): {"csrc/gpu/kernel_args.h", "csrc/gpu/kernel_list.h"},
}

# The one include root of the build (setup.py: -Icsrc): kernels/ is no include root, so a
# kernel's own headers are named from its folder and nothing else can include them.
INCLUDE_ROOT = "csrc"

C_SUFFIXES = {".c", ".h", ".cu", ".cuh", ".cpp"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
PACKAGE = "comfy_kitchen_c"
EXTENSIONS = {"_C", "_C_emu"}  # compiled submodules: they import nothing of the package


def layer_of(rel: str) -> str | None:
    folder = rel.rsplit("/", 1)[0]
    matches = [f for f in FOLDERS if folder == f or folder.startswith(f + "/")]
    return FOLDERS[max(matches, key=len)] if matches else None


def climbs(name: str) -> bool:
    """Whether a quoted include leaves the including file's folder and the include root."""
    return name.startswith("/") or ".." in name.split("/")


def c_files(root: Path) -> list[Path]:
    return sorted(p for top in ("csrc", "kernels") for p in (root / top).rglob("*") if p.suffix in C_SUFFIXES)


def includes(root: Path):
    """(including file, included file or None when unresolved, the written name), all relative to root."""
    for path in c_files(root):
        for name in INCLUDE.findall(path.read_text(errors="replace")):
            found = next((c for c in (path.parent / name, root / INCLUDE_ROOT / name) if c.is_file()), None)
            yield (path.relative_to(root).as_posix(), found.resolve().relative_to(root.resolve()).as_posix()
                   if found else None, name)


def violations(root: Path) -> list[str]:
    bad = []
    for src, dst, name in includes(root):
        a = layer_of(src)
        if a is None:
            note = f"{src}: not in any layer (add its folder to FOLDERS)"
            bad += [] if note in bad else [note]
            continue
        if climbs(name):
            bad.append(f'{src}: #include "{name}" climbs out of its folder: name the header by its path under '
                       f"{INCLUDE_ROOT}/ (or by its name beside the including file)")
            continue
        if dst is None:
            bad.append(f'{src}: #include "{name}" does not resolve to a file of its folder or of {INCLUDE_ROOT}/')
            continue
        b = layer_of(dst)
        if b not in ALLOWED[a]:
            bad.append(f"{src} ({a}) includes {dst} ({b}): {a} may include {', '.join(sorted(ALLOWED[a]))}")
        elif (a, b) in GATES and dst not in GATES[(a, b)]:
            bad.append(f"{src} ({a}) includes {dst}: {a} reaches {b} only through {', '.join(sorted(GATES[(a, b)]))}")
    return bad


def layer_graph(root: Path) -> Counter:
    """(layer, layer) -> how many includes go from one to the other; files outside the
    layers count under their folder."""
    def name(rel):
        return layer_of(rel) or rel.rsplit("/", 1)[0] + "/"
    return Counter((name(src), name(dst)) for src, dst, _ in includes(root)
                   if dst is not None and name(src) != name(dst))


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the directed graph, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def python_imports(root: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports, anywhere in its code (deferred imports
    inside functions count: they only hide a cycle).  The package itself is "__init__";
    ``from . import name`` of something that is not a submodule imports the package."""
    package = root / PACKAGE
    modules = {p.stem for p in package.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for path in package.glob("*.py"):
        edges = graph.setdefault(path.stem, set())
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                if node.level == 1 or node.module == PACKAGE or (node.module or "").startswith(PACKAGE + "."):
                    head = node.module if node.level == 1 else node.module[len(PACKAGE):].lstrip(".")
                    if head:
                        edges.add(head.split(".")[0])
                    else:
                        edges.update(a.name if a.name in modules | EXTENSIONS else "__init__"
                                     for a in node.names)
            elif isinstance(node, ast.Import):
                edges.update(a.name.split(".")[1] for a in node.names if a.name.startswith(PACKAGE + "."))
        edges.discard(path.stem)
        edges.intersection_update(modules)  # extension modules (_C, _C_emu) import nothing of ours
    return graph


def test_includes_follow_the_layers():
    assert violations(ROOT) == []


def test_the_allowed_layers_form_no_cycle():
    assert _cycle({a: b - {a} for a, b in ALLOWED.items()}) is None


def test_every_c_file_is_in_a_layer():
    assert [p for p in c_files(ROOT) if layer_of(p.relative_to(ROOT).as_posix()) is None] == []


def test_python_modules_import_no_cycle():
    assert _cycle(python_imports(ROOT)) is None


def test_the_checks_see_a_wrong_include_and_a_cycle(tmp_path):
    """The checks fail on what they are for: a device layer that includes the op layer,
    the same header reached from the file's own folder, a gate passed by, and two
    modules that import each other."""
    for rel, text in {"csrc/ops/op.h": "", "csrc/cpu/kernels.h": '#include "ops/op.h"\n',
                      "csrc/cpu/rows.h": '#include "../ops/op.h"\n',
                      "csrc/gpu/launch.h": "", "csrc/ops/linear.c": '#include "gpu/launch.h"\n'}.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    (tmp_path / "kernels").mkdir()
    found = violations(tmp_path)
    assert len(found) == 3 and "cpu/kernels.h (cpu) includes csrc/ops/op.h (ops)" in found[0], found
    assert 'csrc/cpu/rows.h: #include "../ops/op.h" climbs out of its folder' in found[1], found
    assert "reaches gpu only through csrc/gpu/gpu.h" in found[2], found
    (tmp_path / PACKAGE).mkdir()
    (tmp_path / PACKAGE / "ops.py").write_text("from . import faults\n")
    (tmp_path / PACKAGE / "faults.py").write_text("def f():\n    from .ops import KERNELS\n")
    assert _cycle(python_imports(tmp_path)) in (["faults", "ops", "faults"], ["ops", "faults", "ops"])


if __name__ == "__main__":
    root = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else ROOT
    for (a, b), n in sorted(layer_graph(root).items()):
        ok = b in ALLOWED.get(a, ())
        print(f"{a:>9} -> {b:<9} {n:3d}{'' if ok else '   (against the layers)'}")
    for line in violations(root):
        print("violation:", line)
    print("python import cycle:", _cycle(python_imports(root)))
