# SPDX-License-Identifier: Apache-2.0
"""Which extension module runs the kernels: ``_C``, or ``_C_emu`` (the emulated device)
inside ``comfy_kitchen_c.testing.emulated_device()``.  Its own module so that the ops and
the fault checks (faults.py) both read it without importing each other."""
import contextvars

from . import _C

# Per thread / asyncio task.
KERNELS = contextvars.ContextVar("comfy_kitchen_c_kernels", default=_C)
