"""Fault: a CNN training loop throttled by a fixed sleep after every step (a rate limiter left
in from sharing the machine, "to keep the box responsive").

The sleep is fixed for the run, and set from this machine's own pace: its first steps (in the
warm-up, unthrottled) are timed, and the sleep is 0.8 (strong) or 0.3 (mild) of their median,
so the throttle is the same share of a step on a fast machine and a slow one (a fixed 6 ms
was 21% of a step on one 2-core machine and 16-19% on another: a mild dose on the rule's
threshold). Fixed: no sleep.
"""

import itertools
import statistics
import time

from _cnn import cnn, images, labels
from _zoo import dose, fixed, train
from torch.utils.data import DataLoader, TensorDataset

SHARE = 0.0 if fixed() else dose(strong=0.8, mild=0.3)
#: Unthrottled steps timed to set the sleep (the warm-up is 32 steps at batch 32).
PACED = 12

if __name__ == "__main__":
    loader = DataLoader(TensorDataset(images(), labels()), batch_size=32, shuffle=True)
    ends: list[float] = []
    pause = [0.0]

    def after_step(step: int, loss: object) -> None:
        if step <= PACED:
            ends.append(time.perf_counter())
            if step == PACED:  # the steps after the first, which warms the allocator up
                pause[0] = SHARE * statistics.median(b - a for a, b in itertools.pairwise(ends[1:]))
        elif pause[0]:
            time.sleep(pause[0])

    print("steps:", train(loader, cnn(width=16), steps=120, after_step=after_step))
    print(f"sleep: {pause[0] * 1e3:.1f} ms")
