"""Where in the code a phase's time goes: its stack samples attributed to functions.

A sample counts for the innermost function of the job's own code on its stack (the site): that
is the code the user can change, and what it called (``torch.save``, ``json.loads``: the
outermost library frame below it) says what it was doing. A sample with no frame of the job's
(a DataLoader worker's loop between batches) counts for its innermost function. Sites do not
overlap, so their shares add up; ``total_share`` (on the stack at all) and ``self_share``
(innermost) are given beside.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from stepdoctor.model import (
    GC_PHASE,
    AllocationSite,
    CodeFrame,
    CodeSite,
    CodeStack,
    RunRecord,
    StackCount,
    StackSample,
)

__all__ = [
    "EVENT_PHASES",
    "MIN_PHASE_SAMPLES",
    "MIN_SITE_SHARE",
    "TOP_SITES",
    "StackIndex",
    "allocation_sites",
    "display_name",
    "phase_sites",
    "stack_counts",
]

#: Sites shown per phase.
TOP_SITES = 3
#: A phase with fewer samples than this gets no sites: at 100 Hz that is 0.1 s of it, and one
#: site's share is then known to ±15 points at best (binomial, n=10).
MIN_PHASE_SAMPLES = 10
#: Phases whose samples are events rather than timed samples (one per full collection):
#: counted exactly, so any number of them says where.
EVENT_PHASES = frozenset({GC_PHASE})
#: A site under this share of its phase's samples is left out: at the ~100 samples of a short
#: phase, 5% is five samples, below which a function's rank is chance.
MIN_SITE_SHARE = 0.05


@dataclass(frozen=True)
class StackIndex:
    """A record's frames and stacks by id."""

    frames: dict[int, CodeFrame]
    stacks: dict[int, CodeStack]

    @classmethod
    def of(cls, record: RunRecord) -> StackIndex:
        return cls({f.id: f for f in record.frames}, {s.id: s for s in record.stacks})

    def frames_of(self, sample: StackSample) -> list[CodeFrame] | None:
        """The sample's frames, outermost first (None: its stack or a frame is unknown)."""
        stack = self.stacks.get(sample.stack)
        if stack is None:
            return None
        frames = [self.frames.get(i) for i in stack.frames]
        return None if any(f is None for f in frames) else frames  # type: ignore[return-value]


def phase_sites(
    record: RunRecord,
    phases: Iterable[str],
    *,
    span_ns: tuple[int, int] | None = None,
    top: int = TOP_SITES,
    index: StackIndex | None = None,
) -> tuple[CodeSite, ...]:
    """Return the top sites of each of ``phases`` (in that order), from the samples taken
    within ``span_ns`` (the whole run when None).

    A phase with fewer than ``MIN_PHASE_SAMPLES`` samples, or whose sites are each under
    ``MIN_SITE_SHARE``, adds none.
    """
    index = index or StackIndex.of(record)
    wanted = list(dict.fromkeys(phases))
    by_phase: dict[str, list[StackSample]] = {p: [] for p in wanted}
    for sample in record.samples:
        kept = by_phase.get(sample.phase)
        if kept is not None and (span_ns is None or span_ns[0] <= sample.t_ns <= span_ns[1]):
            kept.append(sample)
    sites: list[CodeSite] = []
    for phase in wanted:
        sites.extend(_sites(phase, by_phase[phase], index, top))
    return tuple(sites)


def stack_counts(
    record: RunRecord, index: StackIndex | None = None
) -> tuple[tuple[CodeFrame, ...], tuple[CodeStack, ...], tuple[StackCount, ...]]:
    """The whole run's samples counted per phase and stack (a flame graph per phase), with the
    stacks and frames they use; samples whose stack is not in the record are left out."""
    counts = Counter((s.phase, s.stack) for s in record.samples)
    index = index or StackIndex.of(record)
    used = {stack for _, stack in counts if stack in index.stacks}
    stacks = tuple(index.stacks[i] for i in sorted(used))
    frame_ids = {f for s in stacks for f in s.frames}
    frames = tuple(index.frames[i] for i in sorted(frame_ids) if i in index.frames)
    known = {f.id for f in frames}
    good = {s.id for s in stacks if all(f in known for f in s.frames)}
    return (
        frames,
        tuple(s for s in stacks if s.id in good),
        tuple(
            StackCount(phase=phase, stack=stack, samples=n)
            for (phase, stack), n in sorted(counts.items())
            if stack in good
        ),
    )


def _sites(phase: str, samples: list[StackSample], index: StackIndex, top: int) -> list[CodeSite]:
    site_count: Counter[int] = Counter()
    self_count: Counter[int] = Counter()
    total_count: Counter[int] = Counter()
    calls: dict[int, Counter[int]] = {}
    lines: dict[int, Counter[int]] = {}
    counted = 0
    for sample in samples:
        frames = index.frames_of(sample)
        if not frames:
            continue
        counted += 1
        at = next((i for i in range(len(frames) - 1, -1, -1) if frames[i].user), None)
        if at is None:
            at = len(frames) - 1
        site = frames[at].id
        site_count[site] += 1
        if sample.line:
            lines.setdefault(site, Counter())[sample.line] += 1
        self_count[frames[-1].id] += 1
        total_count.update({f.id for f in frames})
        if at + 1 < len(frames):
            calls.setdefault(site, Counter())[frames[at + 1].id] += 1
    if counted < (1 if phase in EVENT_PHASES else MIN_PHASE_SAMPLES):
        return []
    out: list[CodeSite] = []
    for frame_id, n in site_count.most_common(top):
        if n / counted < MIN_SITE_SHARE:
            break
        frame = index.frames[frame_id]
        called = calls.get(frame_id)
        callee = ""
        if called:
            callee_id, times = called.most_common(1)[0]
            if times * 2 > n:  # the call most of its samples were in
                callee = display_name(index.frames[callee_id])
        out.append(
            CodeSite(
                function=frame.function,
                file=frame.file,
                line=lines[frame_id].most_common(1)[0][0] if frame_id in lines else frame.line,
                phase=phase,
                share=n / counted,
                total_share=total_count[frame_id] / counted,
                self_share=self_count[frame_id] / counted,
                samples=n,
                calls=callee,
            )
        )
    return out


def allocation_sites(
    record: RunRecord, kind: str, *, top: int = TOP_SITES
) -> tuple[AllocationSite, ...]:
    """The record's allocation sites of ``kind`` (``gc`` or ``growth``) worth showing."""
    sites = [a for a in record.allocations if a.kind == kind]
    objects = sum(a.count for a in sites) or 1
    # by bytes or by count: a few large tensors, or many small ones holding a graph
    kept = [a for a in sites if max(a.share, a.count / objects) >= MIN_SITE_SHARE]
    return tuple(sorted(kept, key=lambda a: -a.share)[:top])


def display_name(frame: CodeFrame) -> str:
    """A library function as its users write it: ``torch.serialization.save``,
    ``json.loads`` (a module's own file name for the job's code: ``train.log_metrics``)."""
    return f"{_module_of(frame.file)}.{frame.function}" if frame.file else frame.function


def _module_of(file: str) -> str:
    path = file.replace(os.sep, "/")
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in path:
            path = path.rsplit(marker, 1)[1]
            break
    else:
        parts = path.split("/")
        lib = next(
            (i for i in range(len(parts) - 1, -1, -1) if parts[i].startswith("python3")), None
        )
        path = "/".join(parts[lib + 1 :]) if lib is not None else parts[-1]
    if path.endswith(".py"):
        path = path[:-3]
    module = path.replace("/", ".")
    return module.removesuffix(".__init__") or module
