# SPDX-License-Identifier: Apache-2.0
"""Stand-in of comfy/quant_ops.py: ComfyUI's QuantizedTensor is comfy_kitchen's, and ComfyUI
lists comfy_kitchen's backends right after importing it (before custom nodes load), one
line per backend in these words (logging.info; DEBUG in some versions)."""
import logging

import comfy_kitchen as ck
from comfy_kitchen.tensor.base import QuantizedTensor

__all__ = ["QuantizedTensor"]

for k, v in ck.list_backends().items():
    logging.info(f"Found comfy_kitchen backend {k}: {v}")
