# SPDX-License-Identifier: Apache-2.0
"""Reader of flight-record files (written by csrc/diag/flight.c; format in csrc/diag/flight.h).

Parses with ``struct`` only, so a record copied from another computer (or written by a
process whose GPU was lost) is read without the C extension.  ``load`` returns the
records and an analysis: what the GPU completed last, the first work it did not
complete, faults and suspected hangs; and, for ops captured into CUDA graphs (format 3), which
replay of which graph ran last and which of its ops completed in that replay.
"""
from __future__ import annotations

import os
import socket
import struct
import sys
import time

MAGIC = b"CKCFLIGHT"
SUFFIX = ".ckcf"
PREFIX = "flight-"
# Little-endian, no padding: csrc/diag/flight.h ckc_flight_header / ckc_flight_record.  Formats 1
# and 2 had no replay words and no capture field (their error text was 112 bytes).
HEADER = struct.Struct("<16sIIIIQdQ64s32s32sQQII48x")
RECORD = struct.Struct("<QQIIiIQddQQQQQ40s160s112s104s")
RECORD_V1 = struct.Struct("<QQIIiIQddQQQQ40s160s112s112s")
assert HEADER.size == 256 and RECORD.size == 512 and RECORD_V1.size == 512

KINDS = {1: "op", 2: "copy"}
HOST_MEMORY = {0: "", 1: "pinned", 2: "registered", 3: "pageable", 4: "file-mapped", 5: "unknown"}
FAILED, HANG = 2, 3
# From format 2: bit 16 of host_memory marks records of the emulated device (csrc/diag/flight.h
# CKC_FLIGHT_EMULATED); format 1 records have it clear and came from a GPU.
EMULATED = 0x10000


def cache_root() -> str:
    """The package's folder in the user's cache folder (flight records, the CPU speed measurements);
    nothing creates it before something is written there."""
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or os.path.expanduser(r"~\AppData\Local")
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return os.path.join(base, "comfy_kitchen_c")


def default_dir() -> str:
    """COMFY_KITCHEN_C_FLIGHT_DIR (environment or settings file), else the user's cache folder."""
    from . import settings
    configured = settings.load().values["COMFY_KITCHEN_C_FLIGHT_DIR"].value
    if configured:
        return configured
    return os.path.join(cache_root(), "flight")


def record_files(directory: str | None = None) -> list[str]:
    """Flight-record files in directory, oldest first (names start with the start time)."""
    directory = directory or default_dir()
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    return [os.path.join(directory, n) for n in sorted(n for n in names if n.startswith(PREFIX) and n.endswith(SUFFIX))]


def newest_record(directory: str | None = None) -> str | None:
    """The newest record file in directory (default_dir() when None), or None."""
    files = record_files(directory)
    return files[-1] if files else None


def _text(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


ELLIPSIS = "\u2026"


def _message(raw: bytes) -> str:
    """A text field the writer may have cut (csrc/diag/flight.c ckc_text_append keeps what fits,
    mid-word): a text that fills its field is taken as cut and ends at the last whole word,
    with an ellipsis, so that no report shows half a word (or half a UTF-8 character)."""
    text = raw.split(b"\0", 1)[0]
    if len(text) < len(raw) - 1:
        return text.decode("utf-8", "replace")
    words = text.decode("utf-8", "ignore")
    cut = max(words.rfind(c) for c in " ;,")
    kept = words[:cut] if cut > 0 else words
    return kept.rstrip(" ;,:") + ELLIPSIS


def _record(raw: bytes, version: int) -> dict | None:
    if version >= 3:
        (seq, done, kind, state, device, flags, stream, queued, completed, nbytes, host_ptr, host_bytes,
         device_ptr, capture, op, tensors, params, error) = RECORD.unpack(raw)
    else:
        (seq, done, kind, state, device, flags, stream, queued, completed, nbytes, host_ptr, host_bytes,
         device_ptr, op, tensors, params, error) = RECORD_V1.unpack(raw)
        capture = 0
    host_memory = flags & 0xFF
    if seq == 0:
        return None
    # A captured op's mark writes (replay << 32) | low half of seq (csrc/diag/flight.h).
    replay = done >> 32 if capture and done & 0xFFFFFFFF == seq & 0xFFFFFFFF else 0
    if state == FAILED:
        name = "failed"
    elif state == HANG:
        name = "hang_suspected"
    elif (replay != 0) if capture else done == seq:
        name = "completed"
    else:
        name = "queued"
    return {
        "seq": seq, "kind": KINDS.get(kind, f"kind{kind}"), "op": _text(op), "state": name,
        "device": device, "device_kind": "emulated" if flags & EMULATED else "cuda", "stream": stream,
        "queued_unix": queued,
        "completed_unix": completed if completed else None,
        "tensors": _message(tensors), "params": _message(params),
        "bytes": nbytes, "host_ptr": host_ptr, "host_bytes": host_bytes, "device_ptr": device_ptr,
        "host_memory": HOST_MEMORY.get(host_memory, "unknown") if KINDS.get(kind) == "copy" else "",
        "error": _message(error),
        "capture": capture, "replay": replay,
    }


def _records(data: bytes, start: int, count: int, record_size: int, version: int) -> list[dict]:
    records = []
    for k in range(count):
        raw = data[start + k * record_size: start + k * record_size + RECORD.size]
        if len(raw) < RECORD.size:
            break  # a truncated copy: keep what is there
        r = _record(raw, version)
        if r is not None:
            records.append(r)
    return sorted(records, key=lambda r: r["seq"])


def _replay_analysis(captured: list[dict], capture: int, number: int) -> dict:
    """The latest replay's ops: each captured op of that graph completed in it or not (its
    state becomes "completed" or "queued" accordingly; a failed or hung one keeps its state)."""
    ops = [r for r in captured if r["capture"] == capture]
    for r in ops:
        if r["state"] in ("completed", "queued"):
            r["state"] = "completed" if r["replay"] == number else "queued"
    done = [r for r in ops if r["replay"] == number]
    pending = [r for r in ops if r["replay"] != number]
    return {"capture": capture, "number": number, "ops": len(ops),
            "last_completed": done[-1] if done else None,
            "first_incomplete": pending[0] if pending else None,
            "captured_unix": ops[0]["queued_unix"] if ops else None}


def _bring_own_record_up_to_date(path: str) -> None:
    """When path is this process's own record and the device writes its completions into
    pinned words (csrc/diag/flight.h), copies those that landed into the file first, so
    that this reader sees what the C readers see.  Never imports the extension."""
    c = sys.modules.get("comfy_kitchen_c._C")
    own = c.flight_path() if c is not None else None
    if own is not None and os.path.realpath(own) == os.path.realpath(path):
        c.flight_sync()


def load(path: str) -> dict:
    """Parses and analyses one flight-record file (see the module docstring)."""
    _bring_own_record_up_to_date(path)
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < HEADER.size or not data.startswith(MAGIC):
        raise ValueError(f"{path}: not a comfy_kitchen_c flight record")
    (_, version, header_size, record_size, capacity, pid, started, written, host, python, package_version,
     replay_capture, replay_number, capture_capacity, _) = HEADER.unpack_from(data)
    if record_size < RECORD.size or header_size < HEADER.size:
        raise ValueError(f"{path}: record size {record_size} / header size {header_size} not understood "
                         f"(format version {version})")
    if version < 3:
        replay_capture = replay_number = capture_capacity = 0
    records = _records(data, header_size, capacity, record_size, version)
    captured = _records(data, header_size + capacity * record_size, capture_capacity, record_size, version)
    replay = _replay_analysis(captured, replay_capture, replay_number) if replay_number else None
    for r in captured:
        if r["state"] == "queued" and r["replay"] == 0 and (replay is None or r["capture"] != replay["capture"]):
            r["state"] = "captured"  # its graph was never replayed: nothing of it was queued to run
    completed = [r for r in records if r["state"] == "completed"]
    # A stream completes its work in order: a record followed by completed work on its
    # stream is not pending (it was abandoned by a device reset, or its mark lost).
    last_done = {}
    for r in completed:
        last_done[r["stream"]] = r["seq"]
    incomplete = [r for r in records
                  if r["state"] in ("queued", "hang_suspected") and r["seq"] > last_done.get(r["stream"], 0)]
    return {
        "path": path, "format_version": version,
        "process": {"pid": pid, "started_unix": started, "host": _text(host), "python": _text(python),
                    "package_version": _text(package_version)},
        "capacity": capacity,
        "written": max([written] + [r["seq"] for r in records + captured]),
        "records": records,
        "last_completed": completed[-1] if completed else None,
        "first_incomplete": incomplete[0] if incomplete else None,
        "faults": [r for r in records + captured if r["state"] == "failed"],
        "hangs": [r for r in records + captured if r["state"] == "hang_suspected"],
        "captured": captured,
        "replay": replay,
    }


# ---- whose record -----------------------------------------------------------------------------

def header(path: str) -> dict:
    """The "process" part of load()'s result (pid, start, host), from the header alone."""
    with open(path, "rb") as f:
        data = f.read(HEADER.size)
    if len(data) < HEADER.size or not data.startswith(MAGIC):
        raise ValueError(f"{path}: not a comfy_kitchen_c flight record")
    fields = HEADER.unpack(data)
    return {"pid": fields[5], "started_unix": fields[6], "host": _text(fields[8]), "python": _text(fields[9]),
            "package_version": _text(fields[10])}


def _this_host(host: str) -> bool:
    """Whether host (as the C side writes it, at most 63 bytes) names this computer."""
    names = {socket.gethostname(), os.environ.get("COMPUTERNAME", "")}
    return any(n and n[:63].lower() == host.lower() for n in names)


def _linux_start_unix(pid: int) -> float | None:
    """When process pid started (Linux /proc), to tell a reused pid; None elsewhere."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/stat") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith("btime "))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def _running(pid: int) -> bool:
    if sys.platform == "win32":
        import ctypes
        kernel32 = ctypes.windll.kernel32
        handle = kernel32.OpenProcess(0x1000, False, pid)  # PROCESS_QUERY_LIMITED_INFORMATION
        if not handle:
            return False
        code = ctypes.c_ulong()
        try:
            return bool(kernel32.GetExitCodeProcess(handle, ctypes.byref(code))) and code.value == 259  # STILL_ACTIVE
        finally:
            kernel32.CloseHandle(handle)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def owner(process: dict, path: str) -> str:
    """Whose record this is, seen from this process: "this process", "running", "ended",
    or "on another computer (HOST)"."""
    c = sys.modules.get("comfy_kitchen_c._C")
    own = c.flight_path() if c is not None else None
    if own is not None and os.path.realpath(own) == os.path.realpath(path):
        return "this process"
    if process["host"] and not _this_host(process["host"]):
        return f"on another computer ({process['host']})"
    if process["pid"] == os.getpid() or not _running(process["pid"]):
        return "ended"
    started = _linux_start_unix(process["pid"])
    if started is not None and started > process["started_unix"] + 2.0 and started <= time.time():
        return "ended"  # its pid now belongs to a process started after the record
    return "running"


def record_pid(path: str) -> int | None:
    """The pid in a record file's name (PREFIX<ms>-<pid>SUFFIX), or None."""
    name = os.path.basename(path)
    if not (name.startswith(PREFIX) and name.endswith(SUFFIX)):
        return None
    tail = name[len(PREFIX):-len(SUFFIX)].rpartition("-")[2]
    return int(tail) if tail.isdigit() else None
