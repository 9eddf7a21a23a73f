# SPDX-License-Identifier: Apache-2.0
"""Stand-in of comfy/options.py: main.py turns argument parsing on before comfy.cli_args loads."""
args_parsing = False


def enable_args_parsing(enable=True):
    global args_parsing
    args_parsing = enable
