"""Fault: a large cache of Python objects plus per-step history kept as dicts.

Mild: half the history (1,500 dicts a step instead of 3,000). Fixed: ``gc.freeze()`` once the
cache is built, so the collector no longer walks it, and the history kept as plain tuples of
numbers, which the collector stops tracking. The batches are cut in memory up front.
"""

import gc

from _zoo import dose, fixed, mlp, tensors, train

PER_STEP = dose(strong=3000, mild=1500)

if __name__ == "__main__":
    gc.set_threshold(700, 10, 10)
    cache = [{"id": i, "tags": [i, i + 1]} for i in range(1_500_000)]
    if fixed():
        gc.freeze()
    x, y = tensors().tensors
    batches = list(zip(x.split(64), y.split(64), strict=True))
    history: list[object] = []

    def after_step(step: int, loss: object) -> None:
        if fixed():
            history.extend((step, k) for k in range(PER_STEP))
        else:
            history.extend({"step": step, "k": [k]} for k in range(PER_STEP))
        if len(history) > 10 * PER_STEP:
            del history[: 5 * PER_STEP]

    # 400 steps: the collector's full passes come ~280 steps apart at the mild dose (its 25%
    # rule: new long-lived objects a quarter of the cache's), the second at step ~315; a run of
    # 300 steps had it only where the 3 s floor added steps (a fast machine)
    print("steps:", train(batches, mlp(width=512), steps=400, after_step=after_step), len(cache))
