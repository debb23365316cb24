"""Fault: an LSTM language model trained with Adam that saves the whole model and optimizer
(the model object itself, pickled, and Adam's two moments: ~23 MiB) after every step.

Mild: every 3rd step. Fixed: every 500 steps (none in this short run) and once at the end.
"""

import os
import tempfile

import torch
from _zoo import dose, fixed, until_done
from torch import nn

VOCAB, LENGTH, BATCH = 4000, 16, 16
EVERY = 500 if fixed() else dose(strong=1, mild=3)


class LanguageModel(nn.Module):
    """Embedding, one LSTM layer, next-token logits over the vocabulary."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 128)
        self.lstm = nn.LSTM(128, 256, batch_first=True)
        self.head = nn.Linear(256, VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(self.embed(tokens))
        return self.head(out)


if __name__ == "__main__":
    g = torch.Generator().manual_seed(0)
    text = torch.randint(0, VOCAB, (512, LENGTH + 1), generator=g)
    batches = [(t[:, :-1], t[:, 1:]) for t in text.split(BATCH)]
    model = LanguageModel()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    path = os.path.join(tempfile.mkdtemp(), "lm.pt")
    done, step = until_done(40), 0
    while not done(step):
        x, y = batches[step % len(batches)]
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x).reshape(-1, VOCAB), y.reshape(-1))
        loss.backward()
        opt.step()
        step += 1
        if step % EVERY == 0:
            torch.save({"model": model, "optimizer": opt.state_dict(), "step": step}, path)
    if fixed():
        torch.save({"model": model, "optimizer": opt.state_dict(), "step": step}, path)
    print("steps:", step)
