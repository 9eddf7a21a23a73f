# SPDX-License-Identifier: Apache-2.0
"""Stand-in of ComfyUI's main.py startup order: parse the command line, run every custom
node's prestartup_script.py (before torch is imported), import comfy.model_management, load
the custom nodes (registered in sys.modules under their folder name, as older ComfyUI does),
then print one JSON line describing what the node changed."""
import comfy.options

comfy.options.enable_args_parsing()

from comfy.cli_args import args  # noqa: E402

import importlib.util  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s", stream=sys.stdout)
HERE = os.path.dirname(os.path.abspath(__file__))
NODES = os.path.join(HERE, "custom_nodes")


def execute_prestartup_script():
    if args.disable_all_custom_nodes:
        return
    for name in sorted(os.listdir(NODES)):
        script = os.path.join(NODES, name, "prestartup_script.py")
        if os.path.isfile(script):
            spec = importlib.util.spec_from_file_location(os.path.splitext(script)[0], script)
            module = importlib.util.module_from_spec(spec)
            try:
                spec.loader.exec_module(module)
            except Exception as exc:  # noqa: BLE001 - ComfyUI logs and goes on
                logging.error(f"Failed to execute startup-script: {script} / {exc}")


def prompt_worker_cache_args():
    """main.py prompt_worker: the RAM-pressure cache thresholds in GB."""
    if args.cache_classic or args.cache_none or args.cache_lru > 0:
        return None
    ram_mib = comfy.model_management.total_ram
    active, inactive = min(10.0, max(2.0, ram_mib * 0.10 / 1024.0)), min(128.0, ram_mib / 1024.0)
    if len(args.cache_ram) > 0:
        active = args.cache_ram[0]
    if len(args.cache_ram) > 1:
        inactive = args.cache_ram[1]
    return [active, inactive]


def load_custom_nodes():
    for name in sorted(os.listdir(NODES)):
        path = os.path.join(NODES, name)
        if not os.path.isfile(os.path.join(path, "__init__.py")):
            continue
        spec = importlib.util.spec_from_file_location(name, os.path.join(path, "__init__.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)


execute_prestartup_script()
torch_before_comfy = "torch" in sys.modules
import comfy.memory_management  # noqa: E402
import comfy.model_management  # noqa: E402

load_custom_nodes()
report = {
    "torch_imported_by_prestartup": torch_before_comfy,
    "cache_ram": args.cache_ram, "reserve_vram": args.reserve_vram,
    "prompt_worker_cache": prompt_worker_cache_args(),
    "max_pinned_memory": comfy.model_management.MAX_PINNED_MEMORY,
    "read_hooked": hasattr(comfy.memory_management.read_tensor_file_slice_into, "__wrapped__"),
    "gather_hooked": hasattr(comfy.model_management.cast_to_gathered, "__wrapped__"),
}
try:
    from comfy_kitchen.registry import registry
    report["priority"] = list(registry._priority)
except ImportError:
    report["priority"] = None
print("STANDIN-REPORT " + json.dumps(report), flush=True)
