# SPDX-License-Identifier: Apache-2.0
"""``python -m comfy_kitchen_c <command>``: the package's command line.

Each command is a module with ``HELP`` (one line), ``add_arguments(parser)``
and ``main(args) -> exit status``; adding one is adding it to ``COMMANDS``.
"""
from __future__ import annotations

import argparse
import sys

from . import doctor, selftest

COMMANDS = {
    "selftest": selftest,
    "doctor": doctor,
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m comfy_kitchen_c",
                                     description="comfy_kitchen backend \"c\": command line tools")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module in COMMANDS.items():
        command = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(command)
        command.set_defaults(handler=module.main)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
