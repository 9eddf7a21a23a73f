# SPDX-License-Identifier: Apache-2.0
"""A process that loses its (emulated) GPU: a few ops complete, then an injected hang
in dequantize_int8_simple; the next op's boundary fence waits on it, and the watchdog
writes and flushes the hang record.  The process then waits (the raise threshold is
far away) until its parent kills it.

    python tests/fault_scenario.py RECORD_DIR

Prints "hang injected" before the op that waits.  Used by tests/test_flight_record.py
(and by the doctor's test: `doctor --json --record <newest file in RECORD_DIR>`)."""
import os
import sys
from pathlib import Path

if __name__ == "__main__":
    os.environ["COMFY_KITCHEN_C_FLIGHT_DIR"] = sys.argv[1]
    os.environ["COMFY_KITCHEN_C_HANG_MS"] = "100"
    os.environ["COMFY_KITCHEN_C_HANG_RAISE_MS"] = "600000"
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

    import torch

    import comfy_kitchen_c as ckc
    from comfy_kitchen_c import ops
    from comfy_kitchen_c.testing import emulated_device, inject

    x = torch.randn(8, 256)
    with emulated_device(), ckc.checking("boundary"), inject("hang", op="dequantize_int8_simple"):
        staged = torch.empty_like(x)
        ckc.stage(staged, x)
        q, scale = ops.quantize_int8_rowwise(staged)
        ops.quantize_and_rotate_rowwise(staged, None, 256)
        ops.dequantize_int8_simple(q, scale)  # hangs: never completes
        print("hang injected", flush=True)
        ops.quantize_int8_rowwise(staged)  # its boundary fence waits on the hang
    print("not reached", flush=True)
