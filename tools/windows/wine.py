# SPDX-License-Identifier: Apache-2.0
"""Runs Windows programs under Wine for the checks: a throwaway prefix, no debug
channels, Wine's own chatter kept out of the checks' output unless a run fails.

Debian's wine64 package installs /usr/lib/wine/wine64 (the `wine` package adds the
/usr/bin wrappers); either is found.  The first start in a fresh prefix creates it
(seconds); later starts reuse the prefix and its running wineserver."""
from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

CANDIDATES = ["wine64", "/usr/lib/wine/wine64", "wine"]
SERVERS = ["wineserver", "/usr/lib/wine/wineserver64", "/usr/lib/wine/wineserver"]


def _find(candidates: list[str]) -> str | None:
    for c in candidates:
        path = shutil.which(c) if "/" not in c else (c if os.access(c, os.X_OK) else None)
        if path:
            return path
    return None


class Wine:
    """Wine with its own prefix, folder/wineprefix (created on first use)."""

    def __init__(self, folder: Path):
        self.loader = _find(CANDIDATES)
        if self.loader is None:
            raise SystemExit("wine not found (apt-get install wine64): the Windows programs cannot run")
        self.server = _find(SERVERS)
        self.env = {**os.environ, "WINEPREFIX": str(folder / "wineprefix"), "WINEDEBUG": "-all",
                    "WINEDLLOVERRIDES": "mscoree,mshtml=",  # no Mono/Gecko install prompts in a new prefix
                    "DISPLAY": ""}
        self.starts: list[float] = []  # seconds per run, in order

    def boot(self) -> float:
        """Creates the prefix (what the first start in a new prefix does anyway); seconds."""
        start = time.monotonic()
        r = self.run(Path("wineboot"), "--init")
        if r.returncode != 0:
            raise SystemExit(f"wineboot --init failed (exit {r.returncode}):\n{noise_free(r.stderr)}")
        return time.monotonic() - start

    def run(self, exe: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        """Runs exe; stdout and stderr as text (Windows line ends read as \n).  They go
        through files, not pipes: Wine's service processes inherit them and live until
        the wineserver quits, seconds after the program, and a pipe would stay open that
        long."""
        start = time.monotonic()
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            r = subprocess.run([self.loader, str(exe), *args], env=self.env, stdout=out, stderr=err,
                               timeout=timeout)
            out.seek(0)
            err.seek(0)
            stdout, stderr = (f.read().decode(errors="replace").replace("\r\n", "\n") for f in (out, err))
        self.starts.append(time.monotonic() - start)
        return subprocess.CompletedProcess(r.args, r.returncode, stdout, stderr)

    def stop(self) -> None:
        """Ends this prefix's wineserver (it lingers after the last program), so the
        prefix can be removed."""
        if self.server:
            subprocess.run([self.server, "-k"], env=self.env, capture_output=True)
            subprocess.run([self.server, "-w"], env=self.env, capture_output=True)


@contextlib.contextmanager
def session(folder: Path | None):
    """A Wine for one check: its prefix in folder (a reused one) or in a temporary folder,
    the wineserver stopped on leaving; yields (wine, a scratch folder)."""
    with tempfile.TemporaryDirectory() as tmp:
        wine = Wine((folder or Path(tmp)).resolve())
        try:
            yield wine, Path(tmp)
        finally:
            wine.stop()


def noise_free(stderr: str, lines: int = 15) -> str:
    """The end of a failed run's stderr, for the report."""
    return "\n".join(stderr.strip().splitlines()[-lines:])
