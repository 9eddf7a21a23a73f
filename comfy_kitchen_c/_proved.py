# SPDX-License-Identifier: Apache-2.0
"""One validation per call: what comfy_kitchen's registry proved, the op does not prove again.

Through the registry a call is checked by the op's constraint rule (backend.py), which runs
the op's own check (``ops.check_<name>``); then the registry calls the op with the very same
arguments (``impl(**kwargs)``, nothing in between).  The rule leaves its proof here (the
check, the arguments it passed, the check's result), per thread; the op takes it and, when its
own arguments are the same objects in the same places, uses the result instead of checking
again.  Any other call (a direct one, or one whose arguments differ in any place) runs the check.

Where trusting the proof would be unsafe, and why it cannot happen here or is refused:
* arguments replaced between rule and call: compared by identity, place by place; a
  parameter the registry's kwargs lack compares as None, so a defaulted parameter left out
  makes the op check again (only a missed saving);
* a tensor changed in place (``resize_``, ``set_``) between rule and call with the same
  objects: comfy_kitchen runs no code between the two; the remaining case is a caller who
  validates through the registry, mutates a tensor's shape, then calls ``comfy_kitchen_c.ops``
  directly with the same objects, before any other call of that op on the thread;
* a proof not followed by its call (comfy_kitchen's layouts probe a backend with a subset of
  the arguments and call nothing): the op never matches it (other arguments); it holds its
  arguments until the next rule or call of that op on the thread, then is dropped;
* another thread's proof: each thread has its own slot.
"""
from __future__ import annotations

import operator
import threading

from ._checks import copies_fit

_slot = threading.local()


def prove(check, args: tuple, result) -> None:
    """The rule's proof: check passed on args (the op's parameters in order) with result."""
    _slot.proof = (check, args, result)


def checked(check, *args):
    """check(*args), or the registry rule's result when it checked these very arguments; then
    (either way) every non-contiguous argument's copy is checked to fit (_checks.copies_fit)
    before the op makes it."""
    proof = getattr(_slot, "proof", None)
    if proof is not None and proof[0] is check:
        _slot.proof = None
        proved = proof[1]
        if len(proved) == len(args) and all(map(operator.is_, proved, args)):
            copies_fit(check, args)
            return proof[2]
    result = check(*args)
    copies_fit(check, args)
    return result
