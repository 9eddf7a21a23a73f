# SPDX-License-Identifier: Apache-2.0
"""The private parts of comfy_kitchen's registry that "c" reads, each where no public one serves:
the priority list (a setter, no getter: backend.priority), and the thread-local override that
use_backend sets (an explicit "c" is told from a pick by priority by it: backend.forced).  A
comfy_kitchen release that moves one fails here, naming it, before it quietly changes what "c"
does (the override: speed preferences would apply to a named "c"; the priority: activate() and
doctor would fail)."""

import pytest

comfy_kitchen = pytest.importorskip("comfy_kitchen")

from comfy_kitchen.registry import registry  # noqa: E402

from comfy_kitchen_c import backend  # noqa: E402
from conftest import saved_priority  # noqa: E402


def test_the_priority_list_reads_back_what_set_priority_set():
    assert hasattr(registry, "_priority"), (
        f"comfy_kitchen {comfy_kitchen.__version__} has no registry._priority: backend.priority() must read "
        "its backend order another way")
    with saved_priority(registry):
        order = ["eager"] + [name for name in backend.priority(registry) if name != "eager"]
        registry.set_priority(order)
        assert backend.priority(registry)[: len(order)] == order


def test_use_backend_sets_the_thread_local_override_forced_reads():
    assert hasattr(registry, "_thread_local"), (
        f"comfy_kitchen {comfy_kitchen.__version__} has no registry._thread_local: backend.forced() cannot "
        "tell use_backend('c') from a pick by priority")
    with registry.use_backend(backend.BACKEND_NAME):
        assert registry._thread_local.__dict__.get("backend_override") == backend.BACKEND_NAME, (
            "use_backend no longer sets registry._thread_local.backend_override: backend.forced() reads it")
        assert backend.forced()
    assert not backend.forced()
