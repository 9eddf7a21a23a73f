# SPDX-License-Identifier: Apache-2.0
"""The layers (docs/architecture.md) checked by the compiler itself: every C, C++ and
CUDA file of each part is preprocessed with an include path that holds only what the
part may use, in every configuration setup.py builds it in.

tests/test_layers.py reads the #include lines; this test lets the preprocessor resolve
them, so what it sees is what a build sees: headers reached through other headers, every
#if branch of the configurations built, and an include that finds its way around the
include path through the file's own folder ("../ops/op.h").  For each part a sandbox
folder holds symlinks to just the folders of csrc/ that ALLOWED gives it (for a gated
pair, to just the gated headers); the part's files are preprocessed with -I<sandbox> and
no -Icsrc.  Two things fail the check: a header of ours that is not on the part's include
path (the compiler's "No such file"), and a file of ours that the preprocessor opened
but that the part may not use (every header of the dependency list -MM prints).

Configurations, read from setup.py (tools/windows/setup_view.py runs it against
stand-ins for setuptools): the C of _C with the CUDA device (CUDA_MACROS), with none, of
_C_emu (CKC_EMULATED), and of _C on Windows (CUDA_MACROS, _WIN32 in place of __linux__),
the ISA sources with their instruction-set flags, all `gcc -MM -std=c11` (-MM: the
preprocessor's list of the headers each file opened, short where -E's text is megabytes);
the kernels, the emulator and the headers they use as _C_emu compiles them (`g++ -MM -x
c++ -std=c++17`, CKC_EMULATED); and the kernels' .cu sources as nvcc compiles them
(`nvcc -MM -x cu -std=c++17`, no macros; without nvcc, `g++ -D__CUDACC__` stands in, the
CUDA headers left out: no file of ours tests another nvcc macro).  A header's
__CUDACC__ branch is thus seen through the kernels that include it; test_layers.py reads
every branch's #include lines besides.  System headers this machine lacks (windows.h,
Python.h without its development files) are empty stand-ins searched after the system's
own (-idirafter): they are not ours to check.
"""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pytest

from test_layers import ALLOWED, FOLDERS, GATES, INCLUDE_ROOT, c_files, layer_of

ROOT = Path(__file__).resolve().parent.parent


def _load(path: Path):
    """A module loaded from its file, without putting its folder on sys.path (where the
    Windows tools' build.py and check.py would shadow other modules); registered, as its
    dataclasses need."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = sys.modules.setdefault(path.stem, importlib.util.module_from_spec(spec))
    if module.__spec__ is spec:
        spec.loader.exec_module(module)
    return module


setup_view = _load(ROOT / "tools" / "windows" / "setup_view.py")

# Layer -> its folder (FOLDERS maps one folder to each layer).
FOLDER_OF = {layer: folder for folder, layer in FOLDERS.items()}
ANGLE_INCLUDE = re.compile(r'^\s*#\s*include\s*<([^>]+)>', re.MULTILINE)
MISSING = re.compile(r"^(.+?):(\d+):\d+: fatal error: (.+?): No such file or directory$", re.MULTILINE)
# Predefined macros of a Linux compiler that a Windows one lacks.
WIN32_FLAGS = ("-D_WIN32", "-D_WIN64", "-U__linux__", "-U__linux", "-Ulinux", "-U__gnu_linux__", "-U__unix__",
               "-U__unix", "-Uunix")
# The parts whose headers the C++ sources (kernels, emulator) include: those headers are
# preprocessed as C++ too.
CXX_PARTS = ALLOWED["kernels"] | ALLOWED["emu"]


@dataclass(frozen=True)
class Config:
    """One way setup.py compiles: the compiler ("gcc", "g++", "nvcc"), its flags, which
    files ("c": csrc/'s C; "emulator": the kernels, the emulator and the headers they
    use, as C++; "cuda": the kernels' .cu sources, as nvcc compiles them), and the .c
    sources it leaves out (other devices, the other OS)."""
    name: str
    tool: str
    files: str
    flags: tuple[str, ...]
    skips: frozenset[str] = frozenset()


def macro_flags(macros) -> tuple[str, ...]:
    return tuple(f"-D{k}" if v is None else f"-D{k}={v}" for k, v in macros)


@lru_cache(maxsize=None)
def setup_configs() -> tuple[tuple[Config, ...], dict[str, tuple[str, ...]], str | None]:
    """The configurations of this checkout's setup.py, its ISA sources' flags and nvcc.
    nvcc first: its run is the longest, and starts first."""
    ns = setup_view.windows_build(with_cuda=True, win32=False).namespace
    every_c = {p.relative_to(ROOT).as_posix() for p in (ROOT / "csrc").rglob("*.c")}
    isa = {src: tuple(flags["unix"]) for src, flags in ns["ISA_SOURCES"].items()}

    def c_config(name, ext, extra=()):
        skips = every_c - set(ext.sources) - set(isa)  # the ISA sources are jobs of their own
        return Config(name, "gcc", "c", macro_flags(ext.define_macros) + tuple(extra), frozenset(skips))

    with setup_view.as_target(win32=False):
        cuda = ns["extension"]("_C", "cuda", ns["CUDA_MACROS"])
        none = ns["extension"]("_C", "none", [])
        emu = ns["emulated_extension"]()[0]
    with setup_view.as_target(win32=True):
        win = ns["extension"]("_C", "cuda", ns["CUDA_MACROS"])
    nvcc = ns["NVCC"]
    # setup.py's nvcc_command passes no macros.  Without nvcc, g++ with __CUDACC__ sees the
    # same branches of our files (none tests another nvcc macro); cuda_runtime.h is a stand-in.
    device = (Config("nvcc", "nvcc", "cuda", ()) if nvcc else
              Config("g++ -D__CUDACC__", "g++", "cuda", ("-D__CUDACC__",)))
    emulator = Config("emu c++", "g++", "emulator", macro_flags(emu.define_macros))
    configs = (device, c_config("cuda", cuda), c_config("none", none), c_config("emu", emu),
               c_config("win32", win, WIN32_FLAGS), emulator)
    return configs, isa, nvcc


def files_of(root: Path, config: Config) -> list[str]:
    """The files of root that config preprocesses, relative to root.  Under nvcc only the
    .cu sources: the headers they include are checked in their context, and every header
    as C++ in the emulator's configuration (nvcc -MM takes 0.4 s a file)."""
    out = []
    for path in c_files(root):
        rel = path.relative_to(root).as_posix()
        layer = layer_of(rel)
        if layer is None:
            continue  # test_layers.py: every C file is in a layer
        if config.files == "c":
            chosen = rel.startswith(INCLUDE_ROOT + "/") and (path.suffix == ".h" or (
                path.suffix == ".c" and rel not in config.skips))
        elif config.files == "emulator":
            chosen = layer == "kernels" or path.suffix == ".cpp" or (path.suffix == ".h" and layer in CXX_PARTS)
        else:
            chosen = layer == "kernels" and path.suffix == ".cu"
        if chosen:
            out.append(rel)
    return out


def make_sandbox(root: Path, part: str, dest: Path) -> Path:
    """dest/ holding symlinks to the folders of root/csrc that part may use (to the gated
    headers alone where GATES names some); a layer outside csrc/ (kernels/) is no include
    root and gets none."""
    dest.mkdir(parents=True)
    for layer in sorted(ALLOWED[part]):
        folder = FOLDER_OF[layer]
        if not folder.startswith(INCLUDE_ROOT + "/"):
            continue
        name = folder[len(INCLUDE_ROOT) + 1:]
        gate = GATES.get((part, layer))
        if gate is None:
            (dest / name).symlink_to(root / folder, target_is_directory=True)
            continue
        (dest / name).mkdir(parents=True)
        for header in sorted(gate):
            (dest / header[len(INCLUDE_ROOT) + 1:]).symlink_to(root / header)
    return dest


def make_stubs(root: Path, dest: Path) -> Path:
    """Empty stand-ins for every <header> our files name, searched after the system's own
    (-idirafter), so that only headers this machine lacks are stand-ins.  A <name> that is
    a file of csrc/ gets none: the check must see it resolve (or not) by the include path."""
    for path in c_files(root):
        for name in ANGLE_INCLUDE.findall(path.read_text(errors="replace")):
            if not (root / INCLUDE_ROOT / name).exists():
                (dest / name).parent.mkdir(parents=True, exist_ok=True)
                (dest / name).touch()
    return dest


def may_use(part: str) -> str:
    """What part may use, as the messages say it."""
    gates = {layer: g for (p, layer), g in GATES.items() if p == part}
    return ", ".join(layer + (f" (only {', '.join(sorted(gates[layer]))})" if layer in gates else "")
                     for layer in sorted(ALLOWED[part]))


def command(config: Config, nvcc: str | None, sandbox: Path, stubs: Path, flags, files) -> list[str]:
    """The preprocessor run over files: -MM, the headers each file opened (not the system's),
    as one make rule per file; a header not found fails it as it fails a build."""
    include = [f"-I{sandbox}"]
    if config.tool == "nvcc":
        return [nvcc, "-MM", "-x", "cu", "-std=c++17", *include, *files]
    system = ["-isystem", sysconfig.get_paths()["include"], "-idirafter", str(stubs)]
    lang = ["-std=c11"] if config.tool == "gcc" else ["-x", "c++", "-std=c++17"]
    return [config.tool, "-MM", *lang, *config.flags, *flags, *include, *system, *files]


def opened_files(out: str):
    """(input file, opened file) for each header of the make rules -MM printed (one per
    input: "x.o: x.c header ...", its first prerequisite the input itself)."""
    for rule in out.replace("\\\n", " ").splitlines():
        target, _, prerequisites = rule.partition(": ")
        names = [n.replace("\\ ", " ") for n in re.split(r"(?<!\\)\s+", prerequisites.strip()) if n]
        yield from ((names[0], name) for name in names[1:])


def judge(root: Path, part: str, config: Config, cmd: list[str], run) -> list[str]:
    """The violations one preprocessor run shows."""
    real_root = root.resolve()

    def ours(name: str) -> str | None:
        path = Path(os.path.realpath(root / name))
        return path.relative_to(real_root).as_posix() if path.is_relative_to(real_root) else None

    bad = []
    for where, line, name in MISSING.findall(run.stderr):
        bad.append(f'{ours(where) or where}:{line}: #include "{name}" is not on the include path of {part} '
                   f"({config.name}): {part} may use {may_use(part)}")
    for source, name in opened_files(run.stdout):
        rel = ours(name)
        if rel is None:
            continue  # outside the tree: the toolkit's headers
        layer = layer_of(rel)
        gate = GATES.get((part, layer))
        if layer not in ALLOWED[part] or (gate is not None and rel not in gate):
            bad.append(f"{source} ({part}, {config.name}) opens {rel} ({layer}), past its include path: "
                       f"{part} may use {may_use(part)}")
    if run.returncode != 0 and not bad:
        bad.append(f"{part} ({config.name}): {' '.join(cmd[:3])} ... failed:\n{run.stderr[-2000:]}")
    return bad


def include_path_violations(root: Path, work: Path, parts=ALLOWED) -> list[str]:
    """Every violation in the C, C++ and CUDA files of root's parts, each part preprocessed
    with only what it may use on its include path (sandboxes and stand-ins made under work),
    in the configurations of this checkout's setup.py."""
    configs, isa, nvcc = setup_configs()
    stubs = make_stubs(root, work / "stubs")
    sandboxes = {part: make_sandbox(root, part, work / "sandbox" / part) for part in ALLOWED}
    jobs, seen = [], set()
    for config in configs:
        by_part: dict[str, list[str]] = {}
        for rel in files_of(root, config):
            if layer_of(rel) not in parts:
                continue
            seen.add(rel)
            if config.files == "c" and rel in isa:
                jobs.append((layer_of(rel), config, isa[rel], [rel]))
            else:
                by_part.setdefault(layer_of(rel), []).append(rel)
        jobs += [(part, config, (), files) for part, files in sorted(by_part.items())]

    def run(job):
        part, config, flags, files = job
        cmd = command(config, nvcc, sandboxes[part], stubs, flags, files)
        done = subprocess.run(cmd, cwd=root, capture_output=True, text=True, errors="replace")
        return judge(root, part, config, cmd, done)

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        # one finding per line and configuration, however many files reach it (math/mxfp8.h
        # includes math/nvfp4.h: a bad include there is reached from both)
        bad = list(dict.fromkeys(line for found in pool.map(run, jobs) for line in found))
    unseen = [rel for rel in (p.relative_to(root).as_posix() for p in c_files(root))
              if layer_of(rel) in parts and rel not in seen]
    return bad + [f"{rel}: preprocessed in no configuration (tests/test_include_paths.py, files_of)" for rel in unseen]


# gcc and g++ build the extensions (_C_emu's kernels as C++): where they are missing this
# check fails rather than skips, so that CI cannot pass it unrun.  Windows: no gcc, and
# symlinks need privileges there; .ci/run checks on Linux.
needs_compiler = pytest.mark.skipif(os.name == "nt", reason="needs gcc, g++ and symlinks (Linux, macOS)")


@needs_compiler
def test_each_part_compiles_with_only_what_it_may_use(tmp_path):
    assert include_path_violations(ROOT, tmp_path) == []


def planted_tree(tmp_path: Path, plants: dict[str, str]) -> Path:
    """A copy of the checkout's csrc/ and kernels/ with files planted (or replaced)."""
    tree = tmp_path / "tree"
    for top in ("csrc", "kernels"):
        shutil.copytree(ROOT / top, tree / top, ignore=lambda d, names: [n for n in names if n == "__pycache__"])
    for rel, text in plants.items():
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text(text)
    return tree


@needs_compiler
def test_the_check_fails_on_a_back_reference(tmp_path):
    """A CPU file that includes the op layer, one that reaches a GPU header from its own
    folder (whose includes the CPU's include path holds), and a math header that includes
    the contracts: each named, with what the part may use, in every configuration."""
    math = (ROOT / "csrc/math/nvfp4.h").read_text()
    tree = planted_tree(tmp_path, {
        "csrc/cpu/planted.c": '#include "ops/op.h"\n',
        "csrc/cpu/planted_up.c": '#include "../gpu/kernel_args.h"\n',
        "csrc/math/nvfp4.h": math.replace('#include "float_bits.h"',
                                          '#include "float_bits.h"\n#include "contract/status.h"'),
    })
    found = include_path_violations(tree, tmp_path / "work", {"cpu", "math"})
    text = "\n".join(found)
    cpu = "cpu may use contract, cpu, math, platform"
    for config in ("cuda", "none", "emu", "win32"):
        assert f'csrc/cpu/planted.c:1: #include "ops/op.h" is not on the include path of cpu ({config}): {cpu}' \
            in found, text
        assert f"csrc/cpu/planted_up.c (cpu, {config}) opens csrc/gpu/kernel_args.h (gpu), past its include path: " \
            f"{cpu}" in found, text
    for config in ("cuda", "none", "emu", "win32", "emu c++"):
        assert f'csrc/math/nvfp4.h:10: #include "contract/status.h" is not on the include path of math ({config}): ' \
            "math may use math" in found, text
    assert len(found) == 13, text


@needs_compiler
def test_a_gate_holds_on_the_include_path(tmp_path):
    """The op layer sees gpu.h alone of the GPU device: another GPU header is not there."""
    tree = planted_tree(tmp_path, {"csrc/ops/planted.c": '#include "gpu/launch.h"\n'})
    found = include_path_violations(tree, tmp_path / "work", {"ops"})
    assert found and all('csrc/ops/planted.c:1: #include "gpu/launch.h" is not on the include path of ops' in line
                         and "gpu (only csrc/gpu/gpu.h)" in line for line in found), found
