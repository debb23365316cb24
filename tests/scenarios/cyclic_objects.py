"""Fault: a hand-made tracer that records each step as a tree of span objects whose children
point back at their parent (reference cycles): the allocations set the collector off again
and again, and each full collection walks every object of the job, torch's included.

Mild: half the spans a step (2,500 instead of 5,000). Fixed: ``gc.freeze()`` after the first
step (torch imports more of itself at the first optimizer step) and weak references to the
parent, so the spans are freed as soon as the step's tree goes.
"""

import gc
import weakref

from _zoo import dose, fixed, mlp, tensors, train
from torch.utils.data import DataLoader

SPANS = dose(strong=5000, mild=2500)
# read once: 5,000 spans a step each reading the environment made the fixed twin's work
# between steps 20-50% of its step (about 14% without)
FIXED = fixed()


class Span:
    """One traced span; its parent is a strong reference (a cycle) unless the job is fixed."""

    def __init__(self, name: str, parent: "Span | None") -> None:
        self.name = name
        self.parent: object = weakref.ref(parent) if FIXED and parent else parent
        self.children: list[Span] = []
        if parent is not None:
            parent.children.append(self)


def trace_step(step: int) -> Span:
    """A tree of ``SPANS`` spans, four children a node."""
    spans = [Span(f"step {step}", None)]
    for i in range(1, SPANS):
        spans.append(Span(f"op {i}", spans[(i - 1) // 4]))
    return spans[0]


if __name__ == "__main__":
    loader = DataLoader(tensors(), batch_size=64, shuffle=True)
    model = mlp(width=2048)
    last: list[Span] = []

    def after_step(step: int, loss: object) -> None:
        if FIXED and step == 0:
            gc.freeze()
        last[:] = [trace_step(step)]

    print("steps:", train(loader, model, steps=40, after_step=after_step))
