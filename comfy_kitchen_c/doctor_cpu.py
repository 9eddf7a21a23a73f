# SPDX-License-Identifier: Apache-2.0
"""doctor's part on the CPU: what explains where eager's torch ops are fast on it (the matrix and
dot-product extensions torch's GEMMs use, native half precision, the cores), the speed rules
measured on it (cpu_speed.py: where the registry gives a call to eager when it picks "c" by
priority), and the package's cache folder, which `pip uninstall` leaves behind."""
from __future__ import annotations

import os
from typing import TextIO


def cache_folder() -> dict:
    """The package's folder in the user's cache folder and what is in it (nothing is created here)."""
    from . import flight
    root = flight.cache_root()
    held = sorted(os.listdir(root)) if os.path.isdir(root) else []
    return {"folder": root, "exists": os.path.isdir(root), "holds": held}


def report() -> dict:
    """{features, mode, file, exists, environment, rules: [{op, dtype, threads, eager, points, seconds,
    error}], other_environments, cache_folder}."""
    from . import cpu_speed

    known = cpu_speed.known()
    rules = []
    for name, entry in sorted(known["tables"].items()):
        op, key_name, threads = name.split("|")
        probe = cpu_speed.PROBES.get(op)
        if probe is None:
            continue
        rules.append({"op": op, "dtype": key_name, "key_means": probe.key_means, "threads": int(threads),
                      "unit": probe.unit, "eager": cpu_speed.eager_sizes(op, key_name, int(threads), entry),
                      "points": entry.get("points", []), "seconds": entry.get("seconds"), "error": entry.get("error")})
    return {"features": cpu_speed.cpu_features(), "mode": known["mode"], "file": known["file"],
            "exists": known["exists"], "environment": known["environment"], "rules": rules,
            "other_environments": known["other_environments"], "cache_folder": cache_folder()}


def _span(lo, hi, unit: str) -> str:
    if lo == 0 and hi == float("inf"):
        return "at every size"
    if lo == 0:
        return f"up to {hi - 1} {unit}"
    if hi == float("inf"):
        return f"from {lo} {unit}"
    return f"from {lo} to {hi - 1} {unit}"


def print_cpu(doc: dict, out: TextIO) -> None:
    f = doc["features"]
    print("\n== CPU ==", file=out)
    flags = ", ".join(f["flags"]) if f["flags"] else "not readable here"
    print(f"  {f['model']}: {f['cores']} cores, torch {f['threads']} threads, torch's CPU capability "
          f"{f['torch_capability']}, our kernels {f['isa']} on {f['runtime']} threads", file=out)
    print(f"  features torch's GEMMs and half-precision ops use: {flags}", file=out)
    if doc["mode"] == "off":
        print("  speed rules: off (COMFY_KITCHEN_C_CPU_SPEED): \"c\" serves every CPU call it can", file=out)
    else:
        state = "" if doc["exists"] else " (not written yet)"
        print(f"  speed rules: measured on this CPU at the first call each decides, kept in {doc['file']}{state}",
              file=out)
    if doc["rules"]:
        print("  measured here (eager serves the sizes named when \"c\" is picked by priority):", file=out)
        for r in doc["rules"]:
            points = ", ".join(f"{ratio:.2f}x at {size}" for size, ratio, *_ in r["points"])
            where = "; ".join(_span(lo, hi, r["unit"]) for lo, hi in r["eager"]) or "never: \"c\" serves every size"
            extra = f" ({r['error']})" if r["error"] else ""
            print(f"    {r['op']}, {r['dtype']} {r['key_means']}, {r['threads']} thread{'s' * (r['threads'] != 1)}: "
                  f"eager {where}{extra}; ours against eager: {points or 'not timed'}", file=out)
    elif doc["mode"] != "off":
        print("  none measured yet for this CPU and these versions (each rule is timed at its first call: "
              "0.1-0.4 s, a linear's form 5-15 s on 2 cores)", file=out)
    if doc["other_environments"]:
        print(f"  the file also holds {doc['other_environments']} other CPU or version set(s)", file=out)
    c = doc["cache_folder"]
    held = ", ".join(c["holds"]) if c["holds"] else "nothing"
    print(f"  cache folder: {c['folder']} ({'holds ' + held if c['exists'] else 'not created'}); "
          "pip uninstall leaves it: delete it by hand to remove the flight records and measurements", file=out)
