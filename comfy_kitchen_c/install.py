# SPDX-License-Identifier: Apache-2.0
"""``python -m comfy_kitchen_c install-comfyui PATH`` / ``uninstall-comfyui PATH``.

Install writes a custom node, ``PATH/custom_nodes/comfy-kitchen-c/``: ``prestartup_script.py``
(ComfyUI's main.py runs it before it imports torch; it runs comfyui.prestartup), ``__init__.py``
(ComfyUI loads it with the other nodes; it runs node.start and logs one line), an example
settings file, and a manifest of what was written with each file's SHA-256.  The scripts only
locate the installed comfy_kitchen_c and call into it, so upgrading the package needs no
reinstall.  The folder is not called comfy_kitchen_c: ComfyUI versions that register a node
under its folder name in sys.modules would then hide the package itself.

Uninstall removes exactly the files the manifest lists, and only those whose contents are
still what install wrote; anything else (a comfy_kitchen_c.toml the user made, a file the user
edited) stays, and the folder goes only when nothing is left in it.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys

NODE_DIR = "comfy-kitchen-c"
MANIFEST = ".comfy_kitchen_c_install.json"
HELP_INSTALL = "write the ComfyUI custom node that starts backend \"c\" (PATH: the ComfyUI folder)"
HELP_UNINSTALL = "remove the files install-comfyui wrote (and nothing else)"

_HEADER = '''# SPDX-License-Identifier: Apache-2.0
# Written by `python -m comfy_kitchen_c install-comfyui` (comfy-kitchen-c {version});
# `python -m comfy_kitchen_c uninstall-comfyui` removes it.  Edits make uninstall keep it.
'''

PRESTARTUP = _HEADER + '''# ComfyUI runs this before it imports torch: it reads comfy_kitchen_c's settings and applies
# COMFY_KITCHEN_C_RAM_PROFILE / COMFY_KITCHEN_C_RESERVE_VRAM through ComfyUI's own switches
# (comfy_kitchen_c/comfyui.py, loaded by path so that nothing imports torch this early).
import importlib.util
import logging
import os
import sys


def _prestartup():
    spec = importlib.util.find_spec("comfy_kitchen_c")
    if spec is None or not spec.submodule_search_locations:
        logging.error("comfy_kitchen_c is not installed in this Python (%s): "
                      "python -m pip install comfy-kitchen-c", sys.executable)
        return
    path = os.path.join(list(spec.submodule_search_locations)[0], "comfyui.py")
    module_spec = importlib.util.spec_from_file_location("comfy_kitchen_c_comfyui_prestartup", path)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_spec.name] = module
    module_spec.loader.exec_module(module)
    module.prestartup(os.path.dirname(os.path.abspath(__file__)))


try:
    _prestartup()
except Exception as exc:  # noqa: BLE001 - ComfyUI must start whatever happens here
    logging.error("comfy_kitchen_c prestartup failed: %s: %s", type(exc).__name__, exc)
'''

INIT = _HEADER + '''# ComfyUI loads this with the other custom nodes (after it imported comfy.model_management):
# comfy_kitchen_c.node.start activates backend "c", installs the staging hooks and logs one
# line saying what it did and which settings it read.  The node adds no node types.
import logging
import os

NODE_CLASS_MAPPINGS = {{}}
NODE_DISPLAY_NAME_MAPPINGS = {{}}

try:
    from comfy_kitchen_c import node as _node

    _line, _errors = _node.start(os.path.dirname(os.path.abspath(__file__)))
    logging.info(_line)
    for _error in _errors:
        logging.error("comfy_kitchen_c: %s", _error)
except Exception as exc:  # noqa: BLE001 - ComfyUI must start whatever happens here
    logging.error("comfy_kitchen_c not started: %s: %s", type(exc).__name__, exc)
'''

EXAMPLE = '''# comfy-kitchen-c settings for this ComfyUI (written by install-comfyui as an example).
# Copy this file to comfy_kitchen_c.toml in the same folder to use it; environment variables
# (COMFY_KITCHEN_C_<KEY>) win over it.  Every key: docs/settings.md.
#
# check = "boundary"        # launch | boundary | op: where a GPU fault is reported
# flight = true             # the flight record (keep it on)
# hooks = true              # staging hooks on ComfyUI's weight copies
# ram_profile = 32          # behave as ComfyUI does with 32 GiB of RAM (--cache-ram, MAX_PINNED_MEMORY)
# reserve_vram = 2          # --reserve-vram 2
# linear_memory_mb = 256
'''


def files(version: str) -> dict[str, str]:
    return {"prestartup_script.py": PRESTARTUP.format(version=version), "__init__.py": INIT.format(version=version),
            "comfy_kitchen_c.toml.example": EXAMPLE}


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class InstallError(Exception):
    """A ComfyUI folder that cannot be installed into or uninstalled from, with the reason."""


def node_dir(comfyui: str) -> str:
    """PATH/custom_nodes/comfy-kitchen-c, after checking PATH is a ComfyUI folder: main.py, comfy/
    and custom_nodes/ in it (ComfyUI's own; the error names each one missing)."""
    if not os.path.isdir(comfyui):
        raise InstallError(f"{comfyui} is not a folder (the ComfyUI folder holds main.py, comfy/ and custom_nodes/)")
    missing = [name for name, kind in (("main.py", os.path.isfile), ("comfy/", os.path.isdir),
                                       ("custom_nodes/", os.path.isdir))
               if not kind(os.path.join(comfyui, name.rstrip("/")))]
    if missing:
        names = " and ".join(missing) if len(missing) < 3 else "main.py, comfy/ and custom_nodes/"
        raise InstallError(f"{comfyui} does not look like ComfyUI: it has no {names} (the ComfyUI folder holds "
                           "main.py, comfy/ and custom_nodes/: the one that ComfyUI's main.py is in)")
    return os.path.join(comfyui, "custom_nodes", NODE_DIR)


def install(comfyui: str, version: str) -> list[tuple[str, str]]:
    """Writes the node; returns (path, "wrote" | "unchanged") per file.  Files of an earlier install
    are replaced when unedited (a file already as it would be written is left as it is); an edited
    one stops the install (InstallError names it)."""
    target = node_dir(comfyui)
    manifest_path = os.path.join(target, MANIFEST)
    previous = _read_manifest(manifest_path) if os.path.exists(manifest_path) else {}
    contents = files(version)
    for name in contents:
        path = os.path.join(target, name)
        if os.path.exists(path) and (name not in previous or _file_hash(path) != previous[name]):
            raise InstallError(f"{path} exists and was not written by install-comfyui (or was edited): "
                               "move it away first")
    os.makedirs(target, exist_ok=True)
    done = []
    for name, text in contents.items():
        path = os.path.join(target, name)
        if os.path.isfile(path) and _file_hash(path) == _sha256(text.encode()):
            done.append((path, "unchanged"))
            continue
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        done.append((path, "wrote"))
    manifest = {"package_version": version, "files": {n: _sha256(t.encode()) for n, t in contents.items()}}
    text = json.dumps(manifest, indent=2)
    try:
        with open(manifest_path, encoding="utf-8") as f:
            same = f.read() == text
    except OSError:
        same = False
    if not same:
        with open(manifest_path, "w", encoding="utf-8") as f:
            f.write(text)
    return done + [(manifest_path, "unchanged" if same else "wrote")]


def _file_hash(path: str) -> str:
    with open(path, "rb") as f:
        return _sha256(f.read().replace(b"\r\n", b"\n"))


def _read_manifest(path: str) -> dict[str, str]:
    try:
        with open(path, encoding="utf-8") as f:
            return dict(json.load(f)["files"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InstallError(f"{path}: not a manifest install-comfyui wrote ({exc})") from exc


def uninstall(comfyui: str) -> tuple[list[str], list[str]]:
    """Removes what install wrote; returns (removed paths, kept paths with the reason).  Where
    the node was never installed (no node folder) there is nothing to do: ([], [])."""
    target = node_dir(comfyui)
    if not os.path.lexists(target):
        return [], []
    manifest_path = os.path.join(target, MANIFEST)
    if not os.path.exists(manifest_path):
        raise InstallError(f"{target}: no install-comfyui manifest ({MANIFEST}), so nothing is known to be ours")
    removed, kept = [], []
    for name, digest in _read_manifest(manifest_path).items():
        path = os.path.join(target, name)
        if os.path.dirname(os.path.abspath(path)) != os.path.abspath(target):
            kept.append(f"{path}: outside the node folder, never removed")
        elif not os.path.exists(path):
            continue
        elif _file_hash(path) != digest:
            kept.append(f"{path}: edited since install, kept")
        else:
            os.remove(path)
            removed.append(path)
    if kept:  # the manifest stays while files it lists stay
        return removed, kept
    os.remove(manifest_path)
    removed.append(manifest_path)
    pycache = os.path.join(target, "__pycache__")
    if os.path.isdir(pycache) and all(n.startswith(("__init__.", "prestartup_script.")) for n in os.listdir(pycache)):
        for n in os.listdir(pycache):
            os.remove(os.path.join(pycache, n))  # Python's compiled copies of our two scripts
        os.rmdir(pycache)
    left = os.listdir(target)
    if left:
        kept.append(f"{target}: kept, it also holds {', '.join(sorted(left))}")
    else:
        os.rmdir(target)
        removed.append(target)
    return removed, kept


# ---- command line (two commands: see __main__.COMMANDS) ----------------------------------------

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("comfyui", metavar="PATH", help="the ComfyUI folder (the one with main.py)")


def main_install(args: argparse.Namespace) -> int:
    from . import __version__
    try:
        written = install(args.comfyui, __version__)
    except InstallError as exc:
        print(f"install-comfyui: {exc}", file=sys.stderr)
        return 1
    for path, what in written:
        print(f"{what} {path}")
    if all(what == "unchanged" for _, what in written):
        print("The node was already installed as this version writes it: nothing changed.")
        return 0
    print(f"Restart ComfyUI with this Python ({sys.executable}); its log then has one line starting "
          "with \"comfy_kitchen_c\".")
    return 0


def main_uninstall(args: argparse.Namespace) -> int:
    try:
        removed, kept = uninstall(args.comfyui)
    except InstallError as exc:
        print(f"uninstall-comfyui: {exc}", file=sys.stderr)
        return 1
    if not removed and not kept:
        print(f"nothing to remove: {node_dir(args.comfyui)} does not exist (the node is not installed)")
    for path in removed:
        print(f"removed {path}")
    for line in kept:
        print(f"kept {line}")
    _print_cache_folder()
    return 0


def _print_cache_folder() -> None:
    """Where the package keeps files outside ComfyUI (flight records, CPU speed measurements):
    neither this command nor `pip uninstall comfy-kitchen-c` removes them."""
    from .flight import cache_root
    root = cache_root()
    if os.path.isdir(root):
        print(f"comfy-kitchen-c's cache folder {root} ({', '.join(sorted(os.listdir(root))) or 'empty'}) stays: "
              "neither this command nor pip uninstall removes it; delete it by hand if you want them gone "
              "(COMFY_KITCHEN_C_FLIGHT_DIR and COMFY_KITCHEN_C_CPU_SPEED_CACHE, where set, name other places)")
    else:
        print(f"comfy-kitchen-c's cache folder {root} does not exist: nothing of it is left there")
