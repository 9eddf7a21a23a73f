# SPDX-License-Identifier: Apache-2.0
"""The extension module itself: multi-phase init with module state (PEP 489), so a second
instance of _C (a subinterpreter's, or a re-import) gets its own exception classes and
op functions, while what is one per process (the flight record, the CPU thread pool)
stays shared; and the codes it exports for the Python layer."""
import importlib.util

import pytest
import torch

from comfy_kitchen_c import _C, ops


@pytest.fixture(scope="module")
def second_c():
    spec = importlib.util.find_spec("comfy_kitchen_c._C")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_second_instance_has_its_own_state(second_c):
    assert second_c is not _C
    assert second_c.ArgumentError is not _C.ArgumentError
    assert issubclass(second_c.ArgumentError, second_c.KitchenError)
    with pytest.raises(second_c.ArgumentError, match="set_cpu_isa: argument 'isa'"):
        second_c.set_cpu_isa("no-such-isa")
    x = torch.randn(3, 64)
    q, s = torch.empty(3, 64, dtype=torch.int8), torch.empty(3, 1)
    second_c.quantize_int8_rowwise("op", x.__dlpack__(), q.__dlpack__(), s.__dlpack__(), None, 0, 0, 1)
    q_ref, s_ref = ops.quantize_int8_rowwise(x)
    assert torch.equal(q, q_ref) and torch.equal(s, s_ref)
    with pytest.raises(second_c.ArgumentError, match="op: argument 'q'"):
        second_c.quantize_int8_rowwise("op", x.__dlpack__(), q[:2].__dlpack__(), s.__dlpack__(), None, 0, 0, 1)


def test_the_flight_ring_is_the_processs(second_c):
    assert second_c.flight_path() == _C.flight_path()


def test_op_functions_check_their_arity():
    with pytest.raises(TypeError, match=r"quantize_int8_rowwise\(\) takes 8 arguments \(1 given\)"):
        _C.quantize_int8_rowwise("op")
    with pytest.raises(ValueError, match="check must be 0"):
        x = torch.randn(1, 4)
        _C.quantize_int8_rowwise("op", x.__dlpack__(), None, None, None, 0, 0, 1, 7)
