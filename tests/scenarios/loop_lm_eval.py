"""Loop shape: an LSTM language model trained as pytorch/examples' word_language_model does
(batches sliced from one long tensor, no DataLoader, no torch.optim: a gradient clip and a
hand-written SGD update), with an evaluation batch (eval mode, no_grad) after every training
batch: a short probe (a quarter of the training sequence's length), as a job that evaluates this
often keeps it cheap (a whole batch each time is a quarter of the run: frequent-evaluation)."""

import torch
from _zoo import until_done
from torch import nn

VOCAB, EMB, HIDDEN, BPTT, BATCH = 2000, 64, 128, 20, 16
LR, CLIP = 1.0, 0.25


class LanguageModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, EMB)
        self.rnn = nn.LSTM(EMB, HIDDEN)
        self.decode = nn.Linear(HIDDEN, VOCAB)

    def forward(
        self, x: torch.Tensor, hidden: tuple[torch.Tensor, torch.Tensor]
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        out, hidden = self.rnn(self.embed(x), hidden)
        return self.decode(out).view(-1, VOCAB), hidden


def batchify(n: int) -> torch.Tensor:
    tokens = torch.randint(0, VOCAB, (n,), generator=torch.Generator().manual_seed(0))
    return tokens[: n // BATCH * BATCH].view(BATCH, -1).t().contiguous()


def get_batch(
    source: torch.Tensor, i: int, length: int = BPTT
) -> tuple[torch.Tensor, torch.Tensor]:
    i %= len(source) - length - 1
    return source[i : i + length], source[i + 1 : i + 1 + length].reshape(-1)


def zeros() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.zeros(1, BATCH, HIDDEN), torch.zeros(1, BATCH, HIDDEN)


if __name__ == "__main__":
    train_data, val_data = batchify(40_000), batchify(8_000)
    model, criterion = LanguageModel(), nn.CrossEntropyLoss()
    hidden, val_hidden = zeros(), zeros()
    done, steps, evaluations = until_done(60), 0, 0
    while not done(steps):
        model.train()
        x, y = get_batch(train_data, steps * BPTT)
        hidden = (hidden[0].detach(), hidden[1].detach())
        model.zero_grad()
        output, hidden = model(x, hidden)
        loss = criterion(output, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-LR)
        steps += 1
        model.eval()
        with torch.no_grad():
            vx, vy = get_batch(val_data, steps * BPTT, BPTT // 4)
            val_out, val_hidden = model(vx, val_hidden)
            val_loss = criterion(val_out, vy).item()
        evaluations += 1
    print("steps:", steps)
    print("evaluations:", evaluations)
