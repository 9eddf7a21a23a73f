# SPDX-License-Identifier: Apache-2.0
"""The performance model's prediction beside each measurement: benchmarks/gpu_model.py's
predict_ms for the GPU of the model closest to the one at hand, or nothing when the model
is not there (the report then shows "-")."""
from __future__ import annotations

import importlib
from typing import Callable

from .workload import GROUP, LINEAR_OPS, W4A8_OPS

MODEL_GPUS = ("h200", "rtx5070ti")


def model_gpu(name: str, capability: tuple[int, int]) -> str:
    """The modelled GPU closest to this one: the H200 for data-centre parts (Hopper and
    Blackwell, compute capability 9.x and 10.x, and names of that family), the RTX 5070 Ti
    for the rest (consumer cards, the field report's)."""
    upper = name.upper()
    if capability[0] in (9, 10) or any(tag in upper for tag in ("H100", "H200", "H20", "GH200", "B200", "B100")):
        return "h200"
    return "rtx5070ti"


def load_predictor() -> Callable | None:
    """gpu_model.predict_ms, or None where benchmarks/gpu_model.py is not present or fails
    to import (its absence must not stop a GPU run)."""
    try:
        return importlib.import_module("gpu_model").predict_ms
    except Exception:
        return None


def predict_us(predict: Callable | None, op: str, m: int, k: int, n: int, gpu: str) -> float | None:
    """The model's GPU time per call of ours, microseconds; None when it has none."""
    if predict is None:
        return None
    try:
        ms = predict(op, m, k, dtype="bfloat16", gpu=gpu, n=n if op in LINEAR_OPS + W4A8_OPS else None, group=GROUP)
    except Exception:
        return None
    return None if ms is None else ms * 1e3
