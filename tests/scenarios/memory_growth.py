"""Fault: the loss tensors are kept, each with its autograd graph (a classic leak)."""

from _zoo import mlp, tensors, train
from torch.utils.data import DataLoader

if __name__ == "__main__":
    loader = DataLoader(tensors(), batch_size=64, shuffle=True)
    kept: list[object] = []
    model = mlp(width=2048, depth=2)

    def after_step(step: int, loss: object) -> None:
        kept.append(loss * 1.0)  # keeps the graph: should be loss.item()

    print("steps:", train(loader, model, after_step=after_step))
