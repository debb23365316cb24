"""Loop shape: batch inference, no training at all (eval mode, inference_mode)."""

import torch
from _zoo import mlp, tensors, until_done
from torch.utils.data import DataLoader

if __name__ == "__main__":
    model = mlp(width=1024).eval()
    loader = DataLoader(tensors(8192), batch_size=64)
    done, batches = until_done(80), 0
    with torch.inference_mode():
        while not done(batches):
            for x, _ in loader:
                model(x).argmax(1)
                batches += 1
                if done(batches):
                    break
    print("steps:", batches)
