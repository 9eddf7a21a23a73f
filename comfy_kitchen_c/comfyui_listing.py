# SPDX-License-Identifier: Apache-2.0
"""Backend "c" in ComfyUI's own start-up listing of comfy_kitchen backends.

ComfyUI logs ``Found comfy_kitchen backend <name>: {...}`` once per backend from
comfy/quant_ops.py, right after it imports comfy_kitchen (``for k, v in
ck.list_backends().items(): logging.info(...)``; DEBUG in some versions).  That is before
it loads custom nodes, so a node that registers "c" when it loads is never in the list.

The node's prestartup script runs before anything imports torch or comfy_kitchen
(main.py ``execute_prestartup_script``).  It calls ``register_when_kitchen_loads``: a
one-shot import hook on the name ``comfy_kitchen`` that, right after comfy_kitchen's own
module has run (its backends registered), imports comfy_kitchen_c, whose import registers
"c" (priorities unchanged; the node activates it later).  ComfyUI's listing, a few
statements later, then has "c".  Why a hook on that one import and not a .pth file or
sitecustomize: it lives only in the ComfyUI process that runs the node's prestartup
script, fires once, removes itself, and leaves comfy_kitchen's module exactly as its own
loader made it; our import does what comfy_kitchen's own backends do at that moment (no
CUDA call: the driver is opened at the first GPU op).  Whatever fails there is caught and
kept: comfy_kitchen's import, and ComfyUI, go on, and the node says so at load.

Where the hook cannot fire (ComfyUI skipped prestartup scripts, or something imported
comfy_kitchen first and the early import failed), the node logs the line ComfyUI would
have logged, in ComfyUI's words, marked as the node's (``listing_line``).

Stdlib only at import (loaded by path before torch).
"""
from __future__ import annotations

import importlib.abc
import sys

KITCHEN = "comfy_kitchen"


class EarlyRegistration:
    """What the hook did, read back by the node (node.py)."""

    def __init__(self):
        self.registered = False   # "c" was in the registry before ComfyUI listed the backends
        self.error: str | None = None  # why not, when the import failed


def _register(result: EarlyRegistration) -> None:
    try:
        import comfy_kitchen_c  # noqa: F401 - its import registers "c"
        from comfy_kitchen.registry import registry
        result.registered = comfy_kitchen_c.BACKEND_NAME in registry.list_backends()
    except Exception as exc:  # noqa: BLE001 - comfy_kitchen's import (and ComfyUI) must go on
        result.error = f"{type(exc).__name__}: {exc}"


class _Loader(importlib.abc.Loader):
    """comfy_kitchen's own loader, then the registration.  The module's __loader__ and
    __spec__.loader are the original again before comfy_kitchen's code runs."""

    def __init__(self, inner, result: EarlyRegistration):
        self.inner, self.result = inner, result

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        remove_hook()  # one shot: the import is happening
        module.__loader__ = self.inner
        if module.__spec__ is not None:
            module.__spec__.loader = self.inner
        self.inner.exec_module(module)
        _register(self.result)


class _Finder(importlib.abc.MetaPathFinder):
    """Wraps the loader of the spec the other finders give for comfy_kitchen.  A bare
    importlib.util.find_spec("comfy_kitchen") (a check that it is installed) executes nothing,
    so the hook stays until the module is really imported."""

    def __init__(self, result: EarlyRegistration):
        self.result = result

    def find_spec(self, fullname, path=None, target=None):
        if fullname != KITCHEN:
            return None
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            if isinstance(finder, _Finder) or find is None:
                continue  # no recursion through ourselves
            spec = find(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader, self.result)
                return spec
        return None


def remove_hook() -> None:
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _Finder)]


def register_when_kitchen_loads() -> EarlyRegistration:
    """Registers "c" as soon as comfy_kitchen is imported (now, if it already is)."""
    result = EarlyRegistration()
    remove_hook()
    if KITCHEN in sys.modules:
        _register(result)
    else:
        sys.meta_path.insert(0, _Finder(result))
    return result


def listing_line(version: str) -> str:
    """ComfyUI's listing line for "c", as the node logs it where ComfyUI's own list missed "c"."""
    from comfy_kitchen.registry import registry
    status = registry.list_backends().get("c")
    return (f"Found comfy_kitchen backend c: {status} (logged by the comfy_kitchen_c {version} node: "
            "\"c\" registered after ComfyUI listed the backends above)")
