"""Fault: batch inference that scores one sample per model call (a loop over samples), with
the model in eval mode and autograd off.

Mild: 4 samples per call. Fixed: 256 samples per call.
"""

import torch
from _zoo import dose, fixed, mlp, tensors, tick, until_done

PER_CALL = 256 if fixed() else dose(strong=1, mild=4)

if __name__ == "__main__":
    model = mlp().eval()
    data = tensors(n=8192).tensors[0]
    chunks = list(data.split(PER_CALL))
    done, calls, predictions = until_done(steps=max(100, 3000 // PER_CALL), ticks=False), 0, 0
    with torch.inference_mode():
        while not done(calls):
            for x in chunks:
                predictions += int(model(x).argmax(dim=1).numel())
                calls += 1
                tick(predictions)
                if done(calls):
                    break
    print("predictions:", predictions)
