# SPDX-License-Identifier: Apache-2.0
"""doctor's part on int8_linear's GEMM: the cuBLASLt algorithm chosen per shape class
(csrc/gpu/blas_tune.h: timed at a class's first call, kept for the process, and appended to
COMFY_KITCHEN_C_GEMM_CACHE's file when one is set).  doctor usually runs in its own process,
so the choices it shows are the cache file's (every process that wrote it), beside this
process's own."""
from __future__ import annotations

from typing import TextIO

FILE_TAG = "ckc-gemm-1"  # csrc/gpu/blas_tune.c's first field
KEY_FIELDS = 12          # CKC_BLAS_KEY_LEN: kind, device, M bucket, N, K, lda, ldb, ldc, 3 alignments, workspace


def _entry(line: str) -> dict | None:
    """One cache file line as a choice, None when it is not a whole entry."""
    f = line.rstrip("\r\n").split("\t")
    if len(f) != 9 or f[0] != FILE_TAG:
        return None
    try:
        key = [int(v) for v in f[4].split(",")]
        if len(key) != KEY_FIELDS:
            return None
        return {"gpu": f[1], "driver": int(f[2]), "library": int(f[3]), "key": tuple(key), "device": key[1],
                "m_bucket": key[2],
                "n": key[3], "k": key[4], "index": int(f[5]), "candidates": int(f[6]), "us": float(f[7]),
                "source": "timing"}
    except ValueError:
        return None


def read_cache(path: str) -> list[dict]:
    """The cache file's choices, the last line of a class winning (as C reads it)."""
    kept: dict[tuple, dict] = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            e = _entry(line)
            if e is not None:
                kept[(e["gpu"], e["driver"], e["library"], e["key"])] = e
    return list(kept.values())


def report() -> dict:
    """{tuning, cache_file, cache (choices read from it, or its error), process (this process's)}."""
    from . import settings  # here, not at the top: gpu_check loads this file alone (read_cache)

    loaded = settings.current()  # as doctor's other parts read them: loaded once per process
    path = loaded.value("COMFY_KITCHEN_C_GEMM_CACHE")
    doc = {"tuning": bool(loaded.value("COMFY_KITCHEN_C_GEMM_TUNING")), "cache_file": path, "cache": [],
           "cache_error": None, "process": []}
    if path:
        try:
            doc["cache"] = read_cache(path)
        except FileNotFoundError:
            doc["cache_error"] = "not written yet (no int8_linear GEMM on a GPU since it was set)"
        except OSError as exc:
            doc["cache_error"] = f"cannot be read: {exc}"
    try:
        from . import _C
        doc["process"] = _C.blas_choices() if hasattr(_C, "blas_choices") else []
    except ImportError:
        pass
    return doc


def _line(c: dict) -> str:
    how = (f"candidate {c['index']} of the heuristic's answer, fastest of {c['candidates']} eligible "
           f"({c['us']:.1f} us)" if c["source"] != "heuristic" else
           f"candidate {c['index']}, the heuristic's first eligible of {c['candidates']} (not timed)")
    return f"M <= {c['m_bucket']}, N {c['n']}, K {c['k']} on device {c['device']}: {how}"


def print_gemm(doc: dict, out: TextIO) -> None:
    print("\n== GEMM algorithms (int8_linear, cuBLASLt) ==", file=out)
    print(f"  tuning: {'on' if doc['tuning'] else 'off'} (COMFY_KITCHEN_C_GEMM_TUNING); cache file: "
          f"{doc['cache_file'] or 'none (COMFY_KITCHEN_C_GEMM_CACHE)'}"
          + (f", {doc['cache_error']}" if doc["cache_error"] else ""), file=out)
    groups: dict[tuple, list[dict]] = {}
    for c in doc["cache"]:
        groups.setdefault((c["gpu"], c["driver"], c["library"]), []).append(c)
    for (gpu, driver, library), rows in sorted(groups.items()):
        print(f"  {gpu}, driver {driver}, cuBLASLt {library} (cache file):", file=out)
        for c in sorted(rows, key=lambda c: (c["device"], c["n"], c["k"], c["m_bucket"])):
            print(f"    {_line(c)}", file=out)
    if doc["process"]:
        print("  this process:", file=out)
        for c in doc["process"]:
            print(f"    {_line(c)} [{c['source']}]", file=out)
    elif not doc["cache"]:
        print("  no choice recorded yet (one is made at a shape's first int8_linear on a GPU)", file=out)
