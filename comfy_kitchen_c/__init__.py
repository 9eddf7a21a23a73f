# SPDX-License-Identifier: Apache-2.0
"""comfy-kitchen-c: the C/CUDA backend "c" of comfy_kitchen.

Importing registers "c" in comfy_kitchen's registry (when comfy_kitchen is
installed) without changing backend priorities; ``activate()`` puts "c" first,
as does setting ``COMFY_KITCHEN_C_ACTIVATE=1`` before the import.  The ops are
always callable directly as ``comfy_kitchen_c.ops.<name>``.

Every setting (settings.py) is checked first: a refused one (a value that does not parse, hang
limits out of order, a flight folder that cannot be written) and a misspelt name are each a
``SettingWarning`` naming the variable, the value and what it accepts; the package goes on with
the defaults, so that a typo never stops ComfyUI from starting (``doctor`` lists them again).
"""
from . import settings
from .settings import SettingError, SettingWarning

_settings = settings.current()
settings.report(_settings, stacklevel=2)

from . import _C  # noqa: E402  (it takes the C side's settings as it loads: settings.apply)

_isa = _settings.value("COMFY_KITCHEN_C_CPU_ISA")
if _isa is not None and _isa not in _C.cpu_isas():  # the C side keeps the best one instead
    settings.refuse(_settings, "COMFY_KITCHEN_C_CPU_ISA",
                    f"this CPU and build run only {', '.join(_C.cpu_isas())}; {_C.cpu_isa()} is used")

from . import ops  # noqa: E402
from ._C import ArgumentError, ArgumentTypeError, KitchenError  # noqa: E402
from .backend import BACKEND_NAME, activate, deactivate, register  # noqa: E402
from .ops import linear_memory_limit, set_linear_memory_limit  # noqa: E402
from .staging_guard import install_staging_guard, uninstall_staging_guard  # noqa: E402

__version__ = "0.1.0"
__all__ = ["ArgumentError", "ArgumentTypeError", "BACKEND_NAME", "KitchenError", "SettingError", "SettingWarning",
           "activate", "deactivate",
           "install_staging_guard", "linear_memory_limit", "ops", "register", "set_linear_memory_limit",
           "uninstall_staging_guard"]

# ---- faults: checking modes, checked staging, flight record (faults.py, csrc/diag) ----
from . import faults  # noqa: E402
from ._C import CaptureError, CudaFault, HangSuspected, KernelFault, LaunchError, StagingFault  # noqa: E402
from .faults import check_mode, checking, fence, stage  # noqa: E402

__all__ += ["CaptureError", "CudaFault", "HangSuspected", "KernelFault", "LaunchError", "StagingFault", "check_mode",
            "checking", "fence", "stage"]
faults.configure_flight(__version__)

register()
if _settings.value("COMFY_KITCHEN_C_ACTIVATE"):
    activate()
