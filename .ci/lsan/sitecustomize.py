# SPDX-License-Identifier: Apache-2.0
"""Start-up of CI's LeakSanitizer runs (.ci/run puts this folder on PYTHONPATH): torch and
comfy_kitchen are imported with LeakSanitizer off.

Why: LeakSanitizer keeps only the first 5000 distinct leaks it meets ("Too many leaks! Only the
first 5000 leaks encountered will be reported.") and applies .ci/lsan.supp after that cut.
torch's import alone "leaks" ~44,000 objects on purpose (bindings that live for the process),
so a real leak of ours, met later, was cut before the suppressions were read and went
unreported (tests/test_sanitizer_setup.py shows it).  Objects allocated while LeakSanitizer is
disabled are never counted, so those imports no longer crowd ours out; comfy_kitchen_c itself
is imported later, with LeakSanitizer on."""
import ctypes

_process = ctypes.CDLL(None)
_disable = getattr(_process, "__lsan_disable", None)
_enable = getattr(_process, "__lsan_enable", None)
if _disable is not None and _enable is not None:
    _disable()
    try:
        import numpy  # noqa: F401
        import torch  # noqa: F401
        try:
            import comfy_kitchen  # noqa: F401
            import comfy_kitchen.backends.eager.quantization  # noqa: F401
        except ImportError:
            pass
    finally:
        _enable()
