"""Fault: per-step data kept alive: the loss tensors with their autograd graphs (a classic leak)
and, every 4th step, a copy of the first layer's weights (a "history" nobody reads).

Mild: a weight copy every 5th step instead of every 4th (the losses still kept with their
graphs). Fixed: the loss kept as a number (``loss.item()``) and no weight copies.
"""

from _zoo import dose, fixed, mlp, tensors, train
from torch.utils.data import DataLoader

COPY_EVERY = dose(strong=4, mild=5)

if __name__ == "__main__":
    loader = DataLoader(tensors(), batch_size=64, shuffle=True)
    kept: list[object] = []
    model = mlp(width=1536, depth=2)
    first = model[0]

    def after_step(step: int, loss: object) -> None:
        if fixed():
            kept.append(loss.item())  # type: ignore[attr-defined]
            return
        kept.append(loss * 1.0)  # keeps the graph: should be loss.item()
        if step % COPY_EVERY == 0:
            kept.append(first.weight.detach().clone())  # 1.5 MiB each

    print("steps:", train(loader, model, steps=200, after_step=after_step))
