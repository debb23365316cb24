"""Sampled Python stacks: where in the code each phase's time goes (DESIGN.md, "Phases").

A run record holds the frames it saw once (``CodeFrame``), each distinct stack once
(``CodeStack``: frame ids, outermost first) and one ``StackSample`` per sample: when, which stack,
and the phase of the step it fell in. Allocation sites (``AllocationSite``) say which lines
created the objects still alive at a short traced window's end (GC pressure, memory growth).
``CodeSite`` is what a finding shows: a function and its share of the phase it is about.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "GC_PHASE",
    "SETUP_PHASE",
    "UNPHASED",
    "WORKER_PHASE",
    "AllocationSite",
    "CodeFrame",
    "CodeSite",
    "CodeStack",
    "StackCount",
    "StackSample",
]

#: The phase of a sample taken before the job's first step began (imports, data and model
#: set-up) or after its last one ended.
SETUP_PHASE = "setup"
#: The phase of a sample taken as a full (generation-2) collection started in the job's loop
#: thread: one sample per collection, where the code was that set it off.
GC_PHASE = "gc"
#: The phase of py-spy's samples (``run --stacks py-spy``), which say no phase: the whole run.
UNPHASED = "unphased"
#: The phase of a DataLoader worker process's samples: all of its time makes batches.
WORKER_PHASE = "loader_worker"


@dataclass(frozen=True, slots=True, kw_only=True)
class CodeFrame:
    """One Python function seen in a sampled stack."""

    id: int
    function: str
    """Its qualified name (``Dataset.__getitem__``)."""
    file: str
    line: int
    """The line of its ``def`` (1 for a module's top level)."""
    user: bool = True
    """The job's own code: not the standard library, an installed package or stepdoctor."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CodeStack:
    """A distinct stack: ids of ``CodeFrame``, outermost call first."""

    id: int
    frames: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class StackSample:
    """One sample of a thread's stack."""

    t_ns: int
    """When it was taken (the record's clock)."""
    stack: int
    """The ``CodeStack`` id."""
    phase: str
    """The phase of the step the job's loop thread was in (``SETUP_PHASE`` outside steps;
    ``WORKER_PHASE`` in a DataLoader worker)."""
    process: int = 0
    """The process sampled: 0 for the job's own, else a DataLoader worker's pid."""
    line: int = 0
    """The line its innermost frame of the job's own code (else its innermost frame) was at."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AllocationSite:
    """A line whose allocations were still alive at the end of a traced window."""

    kind: str
    """``gc`` (Python objects the collector tracks, allocated in the window and alive at its
    end), ``growth`` (bytes allocated in the window and still held at its end) or ``tensors``
    (tensors made in the window and alive at its end: ``function`` says their dtype, shape and
    ``grad_fn``, ``caller`` what holds them; torch's tensor objects have no traced line) or
    ``types`` (Python objects the collector holds more of at the window's end than at its
    start: ``function`` is their type, ``count`` how many more)."""
    file: str
    line: int
    function: str
    user: bool
    count: int
    """Objects (``gc``, ``tensors``) or memory blocks (``growth``)."""
    size_bytes: int
    """Their size (tensors: their storage)."""
    share: float
    """Their share (0-1) of the kind's objects (``gc``) or bytes (``growth``, ``tensors``)."""
    caller: str = ""
    """The library line below it (``file:line``) when the line is the job's calling into a
    library; for ``tensors``, what holds them."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CodeSite:
    """Where a finding's time goes: a function and its share of the phase."""

    function: str
    file: str
    line: int
    """The line of the function most of the site's samples were at (its ``def`` line when
    the samples have no line)."""
    phase: str
    share: float
    """Share (0-1) of the phase's samples whose innermost frame of the job's own code is this
    function (where no frame is the job's: whose innermost frame is). Sites do not overlap."""
    total_share: float
    """Share (0-1) of the phase's samples with this function anywhere on the stack."""
    self_share: float
    """Share (0-1) of the phase's samples with this function innermost."""
    samples: int
    """The phase's samples counted in ``share``."""
    calls: str = ""
    """The library function this site's samples were mostly in, as the job's code called it
    (``torch.save``, ``json.loads``): the outermost library frame below the site."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StackCount:
    """How many samples of a phase had one stack (a flame graph's data)."""

    phase: str
    stack: int
    samples: int
