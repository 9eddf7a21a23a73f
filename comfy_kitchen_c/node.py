# SPDX-License-Identifier: Apache-2.0
"""What the ComfyUI node does when ComfyUI loads it (custom_nodes/comfy_kitchen_c/__init__.py).

ComfyUI has imported comfy.model_management and comfy.memory_management by then (main.py,
before ``nodes.init_extra_nodes``), and the node's prestartup script has run
(comfyui.prestartup).  ``start`` activates "c" (first in comfy_kitchen's priority; off with
COMFY_KITCHEN_C_ACTIVATE=0), keeps the checking mode and the flight record of the settings,
installs the staging hooks (comfyui_hooks.py; off with COMFY_KITCHEN_C_HOOKS=0; none when ComfyUI
runs on the CPU only, --cpu, whose line then names no GPU machinery), sets
MAX_PINNED_MEMORY for COMFY_KITCHEN_C_RAM_PROFILE where this ComfyUI has no switch for it, and
returns the one line the node logs: what it did and which settings it read, from where, and
where the log lists "c"'s ops (ComfyUI's own listing when the prestartup hook registered "c"
before it, comfyui_listing.py; else a listing line the node logs itself, in ComfyUI's words).
"""
from __future__ import annotations

import logging
import os
import sys

from . import comfyui

GIB = 1 << 30


def _prestartup_state(node_dir: str):
    state = sys.modules.get(comfyui.STATE_MODULE)
    if state is not None:
        return state
    # Prestartup scripts are skipped with --disable-all-custom-nodes (and whitelisted nodes);
    # run the step now: --cache-ram is still read later, by the prompt worker.  ComfyUI listed
    # comfy_kitchen's backends before this: "c" was not in that list.
    state = comfyui.prestartup(node_dir)
    state.early = None
    return state


def _set_max_pinned(state) -> str | None:
    """MAX_PINNED_MEMORY for the RAM profile, set directly (no switch in this ComfyUI)."""
    model_management = sys.modules.get("comfy.model_management")
    if state.pinned_profile is None or model_management is None:
        return None
    current = getattr(model_management, "MAX_PINNED_MEMORY", None)
    if current is None or current <= 0:
        return "MAX_PINNED_MEMORY left as is (pinned memory is off)"
    model_management.MAX_PINNED_MEMORY = state.pinned_profile
    return (f"MAX_PINNED_MEMORY {current / GIB:.1f} -> {state.pinned_profile / GIB:.1f} GiB "
            "(set directly: this ComfyUI has no switch for it)")


def _listed(state, registry, version: str) -> str:
    """Where the log shows "c"'s ops: ComfyUI's own listing (registered before it, by the
    prestartup hook, comfyui_listing.py), else the listing line this logs now, in ComfyUI's words."""
    ops = len(registry.list_backends().get("c", {}).get("capabilities", ()))
    early = getattr(state, "early", None)
    if early is not None and early.registered:
        return f'{ops} ops, in ComfyUI\'s listing above ("Found comfy_kitchen backend c")'
    from comfy_kitchen_c import comfyui_listing
    if early is not None:
        comfyui_listing.remove_hook()
    why = ("prestartup scripts did not run" if early is None
           else early.error or "comfy_kitchen was not imported after the prestartup script")
    logging.info(comfyui_listing.listing_line(version))
    return f"{ops} ops, listed by this node (not in ComfyUI's listing: {why})"


def _cpu_only() -> str | None:
    """Why this ComfyUI runs its models on the CPU only (its --cpu: comfy.cli_args, or
    comfy.model_management's cpu_state CPU), None where it runs them on a GPU."""
    cli = sys.modules.get("comfy.cli_args")
    if getattr(getattr(cli, "args", None), "cpu", False):
        return "ComfyUI runs with --cpu"
    state = getattr(sys.modules.get("comfy.model_management"), "cpu_state", None)
    if getattr(state, "name", None) == "CPU":
        return "ComfyUI runs on the CPU"
    return None


def start(node_dir: str) -> tuple[str, list[str]]:
    """Starts the node; returns (the log line, errors to log: refused settings, whose defaults
    apply).  Raises ImportError when comfy_kitchen_c cannot start; the node logs that and
    ComfyUI goes on."""
    state = _prestartup_state(node_dir)
    import comfy_kitchen_c
    from comfy_kitchen_c import comfyui_hooks, faults, settings

    current = settings.current()
    done = []
    activate = current.value("COMFY_KITCHEN_C_ACTIVATE")
    from comfy_kitchen.registry import registry
    if activate is None or activate:
        comfy_kitchen_c.activate()
        done.append(f'"c" first in priority ({", ".join(registry._priority)})')
    else:
        done.append('"c" registered, not activated (COMFY_KITCHEN_C_ACTIVATE=0)')
    done.append(_listed(state, registry, comfy_kitchen_c.__version__))
    cpu_only = _cpu_only()
    if cpu_only:  # the GPU's machinery has nothing to do: the line does not announce it
        done.append(f"the CPU's kernels only ({cpu_only}): no GPU checking, flight record or staging hooks")
    else:
        done.append(f"checking mode {faults.check_mode()}")
        flight_on = current.value("COMFY_KITCHEN_C_FLIGHT")
        done.append(f"flight record {'in ' + comfy_kitchen_c.flight.default_dir() if flight_on else 'off'}")
        if current.value("COMFY_KITCHEN_C_HOOKS"):  # a refused value is in state.errors; its default (on) applies
            hooked = comfyui_hooks.install()
            done.append("staging hooks on " + (", ".join(hooked) if hooked else "nothing (no copy point loaded)"))
        else:
            done.append("staging hooks off")
    comfy = list(state.actions)
    pinned = _set_max_pinned(state)
    if pinned:
        comfy.append(pinned)
    if comfy:
        done.append("ComfyUI: " + "; ".join(comfy))
    line = (f"comfy_kitchen_c {comfy_kitchen_c.__version__} ({os.path.dirname(comfy_kitchen_c.__file__)}): "
            + "; ".join(done) + f"; settings: {settings.describe(current)}")
    return line, list(state.errors)  # the prestartup's: every refused setting (its default is used)
