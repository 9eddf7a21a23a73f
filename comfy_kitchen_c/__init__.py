"""comfy-kitchen-c: the C/CUDA backend "c" of comfy_kitchen.

Importing registers "c" in comfy_kitchen's registry (when comfy_kitchen is
installed) without changing backend priorities; ``activate()`` puts "c" first,
as does setting ``COMFY_KITCHEN_C_ACTIVATE=1`` before the import.  The ops are
always callable directly as ``comfy_kitchen_c.ops.<name>``.
"""
import os

from . import ops
from ._C import ArgumentError, ArgumentTypeError, KitchenError
from .backend import BACKEND_NAME, activate, register
from .ops import linear_memory_limit, set_linear_memory_limit
from .staging_guard import install_staging_guard, uninstall_staging_guard

__version__ = "0.1.0"
__all__ = ["ArgumentError", "ArgumentTypeError", "BACKEND_NAME", "KitchenError", "activate",
           "install_staging_guard", "linear_memory_limit", "ops", "register", "set_linear_memory_limit",
           "uninstall_staging_guard"]

# ---- faults: checking modes, checked staging, flight record (faults.py, csrc/diag) ----
from . import faults  # noqa: E402
from ._C import CaptureError, CudaFault, HangSuspected, KernelFault, LaunchError, StagingFault  # noqa: E402
from .faults import check_mode, checking, fence, stage  # noqa: E402

__all__ += ["CaptureError", "CudaFault", "HangSuspected", "KernelFault", "LaunchError", "StagingFault", "check_mode", "checking",
            "fence", "stage"]
faults.configure_flight(__version__)

register()
if os.environ.get("COMFY_KITCHEN_C_ACTIVATE") == "1":
    activate()
