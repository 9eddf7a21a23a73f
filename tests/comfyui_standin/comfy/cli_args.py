# SPDX-License-Identifier: Apache-2.0
"""Stand-in of comfy/cli_args.py: the switches comfy_kitchen_c reads or sets, with ComfyUI's
types, defaults and mutual exclusions.  STANDIN_PINNED_SWITCH=1 adds --pinned-memory (only the
newest ComfyUI has it)."""
import argparse
import os

import comfy.options

parser = argparse.ArgumentParser()
cache_group = parser.add_mutually_exclusive_group()
cache_group.add_argument("--cache-ram", nargs="*", type=float, default=[], metavar="GB")
cache_group.add_argument("--cache-classic", action="store_true")
cache_group.add_argument("--cache-lru", type=int, default=0)
cache_group.add_argument("--cache-none", action="store_true")
cache_group.add_argument("--high-ram", action="store_true")
parser.add_argument("--reserve-vram", type=float, default=None)
parser.add_argument("--vram-headroom", type=float, default=0)
parser.add_argument("--async-offload", nargs="?", const=2, type=int, default=None)
parser.add_argument("--disable-async-offload", action="store_true")
parser.add_argument("--disable-dynamic-vram", action="store_true")
parser.add_argument("--disable-cuda-graphs", action="store_true")
parser.add_argument("--disable-pinned-memory", action="store_true")
parser.add_argument("--disable-all-custom-nodes", action="store_true")
parser.add_argument("--cpu", action="store_true")
if os.environ.get("STANDIN_PINNED_SWITCH") == "1":
    parser.add_argument("--pinned-memory", type=float, default=None, metavar="GB")

args = parser.parse_args() if comfy.options.args_parsing else parser.parse_args([])
if args.high_ram:
    args.cache_classic = True
