# SPDX-License-Identifier: Apache-2.0
"""Stand-in of comfy/quant_ops.py: ComfyUI's QuantizedTensor is comfy_kitchen's."""
from comfy_kitchen.tensor.base import QuantizedTensor  # noqa: F401
