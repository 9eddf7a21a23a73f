# SPDX-License-Identifier: Apache-2.0
"""``python -m comfy_kitchen_c stress`` at CI size: on the CPU every run is clean; on the emulated
device the injected faults and hangs appear in the matrix, each with a flight record that names
the failed copy or the hung op."""
import argparse
import io
import json
import os

import pytest

from comfy_kitchen_c import flight, stress, stress_model

pytest.importorskip("comfy_kitchen")


def run(tmp_path, *argv):
    parser = argparse.ArgumentParser()
    stress.add_arguments(parser)
    args = parser.parse_args(["--quiet", "--json", str(tmp_path / "stress.json"), "--out", str(tmp_path / "records"),
                              *argv])
    out = io.StringIO()
    import contextlib
    with contextlib.redirect_stdout(out):
        assert stress.main(args) == 0
    with open(tmp_path / "stress.json") as f:
        return json.load(f), out.getvalue()


def rows(text: str) -> dict:
    """{(regime, backend, option): [runs, clean, faults, hangs, wrong]} of the printed matrix."""
    table = {}
    for line in text.splitlines():
        cells = line.split()
        if len(cells) >= 8 and cells[0] in stress.REGIMES and cells[3].isdigit():
            table[tuple(cells[:3])] = [int(c) for c in cells[3:8]]
    return table


def test_report_shapes_at_full_scale():
    s = stress_model.Shapes.scaled(1.0)
    assert (s.hidden, s.ffn, s.tokens, s.layers) == (5376, 14336, 80640, 90)
    assert s.matrix("qkv") == (3 * 5376, 5376) and s.matrix("up") == (2 * 14336, 5376)
    assert s.matrix("down") == (5376, 14336)
    assert 31e9 < s.layers * s.layer_bytes() < 32.5e9  # the report's 31.7 GB int8 file


def test_cpu_runs_are_clean(tmp_path):
    doc, text = run(tmp_path, "--device", "cpu", "--scale", "0.02", "--layers", "2", "--tokens", "32", "--runs", "2")
    table = rows(text)
    assert set(table) == {(r, "c", o) for r in stress.REGIMES for o in ("reuse", "reuse+fence")}
    assert all(counts == [2, 2, 0, 0, 0] for counts in table.values()), text
    assert all(run["seq"] for cell in doc["cells"] for run in cell["runs"])


def test_injected_faults_and_hangs_appear_in_the_matrix(tmp_path):
    doc, text = run(tmp_path, "--device", "emulated", "--scale", "0.02", "--layers", "1", "--tokens", "16",
                    "--steps", "1", "--runs", "3", "--regime", "page-cache", "--hang-ms", "100",
                    "--inject", "copy:stage:1@2", "--inject", "hang:int8_linear:3@3")
    table = rows(text)
    assert table == {("page-cache", "c", "reuse"): [3, 1, 1, 1, 0],
                     ("page-cache", "c", "reuse+fence"): [3, 1, 1, 1, 0]}, text
    for cell in doc["cells"]:
        outcomes = [r["outcome"] for r in cell["runs"]]
        assert outcomes == ["clean", "fault", "hang"]
        fault, hang = cell["runs"][1], cell["runs"][2]
        assert fault["injected"] == "copy:stage:1" and hang["injected"] == "hang:int8_linear:3"
        assert " in stage (flight record seq " in fault["message"]
        assert hang["message"].startswith("HangSuspected in int8_linear (flight record seq ")
        record = flight.load(fault["snapshot"])
        failed = [r for r in record["records"] if fault["seq"][0] <= r["seq"] <= fault["seq"][1]
                  and r["state"] in ("failed", "queued")]
        assert failed and failed[0]["op"] == "stage" and failed[0]["device_kind"] == "emulated"
        record = flight.load(hang["snapshot"])
        hung = [r for r in record["records"] if r["state"] == "hang_suspected" and r["seq"] >= hang["seq"][0]]
        assert hung and hung[0]["op"] == "int8_linear"
    assert os.path.isdir(tmp_path / "records")


def test_bad_inject_spec_is_refused():
    with pytest.raises(argparse.ArgumentTypeError, match="KIND\\[:OP\\[:NTH\\]\\]@RUN"):
        stress.parse_inject("melt:stage@1")
    assert stress.parse_inject("copy:stage:3@2") == (2, "copy", "stage", 3)
    assert stress.parse_inject("hang@1") == (1, "hang", None, 1)
