"""Event codes of the hot path (see docs/design/hot-path.md).

An event is a tuple ``(t_ns, code, arg, thread_id)`` appended to a deque. ``arg`` depends on
the code:

=============  ============================================================
code           arg
=============  ============================================================
ENTER          the phase name entered
EXIT           ``None``, or the batch size when leaving ``data_wait``
STEP           the batch size given to ``Session.step()`` (or ``None``)
OPT_END        ``id(optimizer)``; leaves the ``optimizer`` phase
FWD_ENTER      ``fwd_arg(id(model), grad, training)``: an outermost model call starts
FWD_EXIT       ``id(model)``; it ends
GC_START       the generation being collected
GC_STOP        the generation collected
RESET          ``None``: time since the last boundary is not the job's (an experiment ran
               in its thread); the open step starts again now
=============  ============================================================
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "ENTER",
    "EXIT",
    "FWD_ENTER",
    "FWD_EXIT",
    "GC_START",
    "GC_STOP",
    "OPT_END",
    "RESET",
    "STEP",
    "Event",
    "fwd_arg",
    "split_fwd_arg",
]

Event = tuple[int, int, object, int]

ENTER: Final = 0
EXIT: Final = 1
STEP: Final = 2
OPT_END: Final = 3
FWD_ENTER: Final = 4
FWD_EXIT: Final = 5
GC_START: Final = 6
GC_STOP: Final = 7
RESET: Final = 8


def fwd_arg(model_id: int, grad: bool, training: bool) -> int:
    """Pack a FWD_ENTER arg: the model's id and whether autograd and train mode were on."""
    return model_id << 2 | grad << 1 | training


def split_fwd_arg(arg: int) -> tuple[int, bool, bool]:
    """Unpack ``fwd_arg``: ``(model_id, grad, training)``."""
    return arg >> 2, bool(arg & 2), bool(arg & 1)
