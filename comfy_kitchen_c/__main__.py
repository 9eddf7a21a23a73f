# SPDX-License-Identifier: Apache-2.0
"""``python -m comfy_kitchen_c <command>``: the package's command line.

Each command is (help line, ``add_arguments(parser)``, ``main(args) -> exit status``),
mostly a module's ``HELP``, ``add_arguments`` and ``main``; adding one is adding it to
``COMMANDS``.
"""
from __future__ import annotations

import argparse
import sys

from . import doctor, install, selftest, stress

COMMANDS = {
    "selftest": (selftest.HELP, selftest.add_arguments, selftest.main),
    "doctor": (doctor.HELP, doctor.add_arguments, doctor.main),
    "stress": (stress.HELP, stress.add_arguments, stress.main),
    "install-comfyui": (install.HELP_INSTALL, install.add_arguments, install.main_install),
    "uninstall-comfyui": (install.HELP_UNINSTALL, install.add_arguments, install.main_uninstall),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m comfy_kitchen_c",
                                     description="comfy_kitchen backend \"c\": command line tools")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (help_line, add_arguments, main_function) in COMMANDS.items():
        command = sub.add_parser(name, help=help_line, description=help_line)
        add_arguments(command)
        command.set_defaults(handler=main_function)
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
