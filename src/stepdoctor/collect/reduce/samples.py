"""Pair the stack sampler's samples with the phases the reducer gave them, at each flush.

The sampler appends a ``SAMPLE`` event and then walks the stack; the monitor may drain the
events in between, so a phase can arrive before its sample or after it: each waits for the
other here, by sample id.
"""

from __future__ import annotations

from collections.abc import Sequence

from stepdoctor.collect.sampling.stacks import StackSampler
from stepdoctor.model import SETUP_PHASE, CodeFrame, CodeStack, StackSample

__all__ = ["SamplePairer"]


class SamplePairer:
    """Turn a ``StackSampler``'s samples and the reducer's sample phases into record items."""

    def __init__(self, sampler: StackSampler) -> None:
        self.sampler = sampler
        self._waiting_samples: dict[int, tuple[int, int, int]] = {}
        self._waiting_phases: dict[int, str] = {}
        self.straddled = 0
        """Samples left out: the loop's thread appended an event between the time the sample
        was due and the sample (``collect/sampling/stacks.py``)."""

    def collect(
        self, phases: Sequence[tuple[object, str]], *, final: bool = False
    ) -> tuple[list[CodeFrame], list[CodeStack], list[StackSample]]:
        """Return the new frames, stacks and the samples whose phase is known.

        Args:
            phases: ``Reducer.take_sample_phases()``.
            final: the run ended: a sample whose event the reducer never saw is ``setup``.
        """
        complete_below = self.sampler.next_id - 1  # samples before it were all handed out
        for sample_id, t_ns, stack, line in self.sampler.take():
            if stack >= 0:
                self._waiting_samples[sample_id] = (t_ns, stack, line)
        for key, phase in phases:
            if isinstance(key, int):
                self._waiting_phases[key] = phase
        samples: list[StackSample] = []
        for sample_id in sorted(self._waiting_samples.keys() & self._waiting_phases.keys()):
            t_ns, stack, line = self._waiting_samples.pop(sample_id)
            phase = self._waiting_phases.pop(sample_id)
            if phase:
                samples.append(StackSample(t_ns=t_ns, stack=stack, phase=phase, line=line))
            else:  # it straddled an event of the loop (the reducer's ""): left out
                self.straddled += 1
        if final:
            samples.extend(
                StackSample(t_ns=t_ns, stack=stack, phase=SETUP_PHASE, line=line)
                for t_ns, stack, line in self._waiting_samples.values()
            )
            self._waiting_samples.clear()
        # a phase whose sample had no frame of the job's (stack -1) never pairs
        for sample_id in [i for i in self._waiting_phases if final or i < complete_below]:
            del self._waiting_phases[sample_id]
        samples.extend(self.sampler.take_events())
        frames, stacks = self.sampler.take_table()
        return frames, stacks, samples
