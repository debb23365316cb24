"""Fault: an LSTM tagger whose per-token accuracy is computed element by element in Python,
indexing the output tensor once per token, after every step.

Mild: the metric over half the sequences of each batch. Fixed: the same metric as one tensor
expression read with ``.item()``.
"""

import torch
from _zoo import dose, fixed, until_done
from torch import nn

VOCAB, TAGS, LENGTH, BATCH = 2000, 24, 32, 32
SCORED = dose(strong=BATCH, mild=BATCH // 2)  # sequences of a batch the metric reads


class Tagger(nn.Module):
    """Embedding, one LSTM layer, a tag per token; returns (batch * length) x tags logits."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 64)
        self.lstm = nn.LSTM(64, 96, batch_first=True)
        self.head = nn.Linear(96, TAGS)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(self.embed(tokens))
        return self.head(out).reshape(-1, TAGS)


def token_accuracy(logits: torch.Tensor, y: torch.Tensor) -> float:
    """Share of tokens tagged right, over the first ``SCORED`` sequences."""
    if fixed():
        return (logits.argmax(1) == y).float().mean().item()
    correct = 0
    for i in range(SCORED * LENGTH):
        correct += int(logits[i].argmax() == y[i])
    return correct / (SCORED * LENGTH)


if __name__ == "__main__":
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, VOCAB, (2048, LENGTH), generator=g)
    batches = list(zip(tokens.split(BATCH), (tokens % TAGS).split(BATCH), strict=True))
    model = Tagger()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    done, step, accuracy = until_done(100), 0, 0.0
    while not done(step):
        x, y = batches[step % len(batches)]
        opt.zero_grad()
        logits = model(x)
        loss = nn.functional.cross_entropy(logits, y.reshape(-1))
        loss.backward()
        opt.step()
        accuracy = token_accuracy(logits.detach(), y.reshape(-1))
        step += 1
    print("steps:", step, "accuracy:", accuracy)
