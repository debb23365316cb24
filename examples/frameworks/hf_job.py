"""A small Hugging Face Trainer job: a 2-layer BERT built from a config (no downloads) that
classifies random token sequences.

``HF_FAULT=collator``: a data collator that pads each batch in Python, token by token, and
checks every token against the vocabulary (the planted slow collator).
``HF_STEPS``: optimizer steps (default 40). ``HF_ACCUMULATION``: micro-batches per step
(default 1). ``HF_EVAL_STEPS``: evaluate every N steps (default: never). ``HF_SAVE_STEPS``:
save a checkpoint every N steps (default: never).
"""

import os
import tempfile

import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

FAULT = os.environ.get("HF_FAULT", "")
STEPS = int(os.environ.get("HF_STEPS", "40"))
ACCUMULATION = int(os.environ.get("HF_ACCUMULATION", "1"))
EVAL_STEPS = int(os.environ.get("HF_EVAL_STEPS", "0"))
SAVE_STEPS = int(os.environ.get("HF_SAVE_STEPS", "0"))
VOCAB, LENGTH, BATCH = 1000, 64, 16


class Tokens(torch.utils.data.Dataset):  # type: ignore[type-arg]
    """Random token sequences of varying length with a label."""

    def __init__(self, n: int) -> None:
        g = torch.Generator().manual_seed(0)
        self.lengths = torch.randint(LENGTH // 2, LENGTH + 1, (n,), generator=g).tolist()
        self.ids = torch.randint(1, VOCAB, (n, LENGTH), generator=g)
        self.labels = torch.randint(0, 2, (n,), generator=g).tolist()

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> dict[str, object]:
        return {"input_ids": self.ids[i, : self.lengths[i]], "labels": self.labels[i]}


def pad(batch: list[dict[str, object]]) -> dict[str, torch.Tensor]:
    """Pad to the longest sequence of the batch, in tensor operations."""
    longest = max(len(b["input_ids"]) for b in batch)  # type: ignore[arg-type]
    ids = torch.zeros(len(batch), longest, dtype=torch.long)
    for row, b in enumerate(batch):
        seq = b["input_ids"]
        ids[row, : len(seq)] = seq  # type: ignore[arg-type]
    return {
        "input_ids": ids,
        "attention_mask": (ids != 0).long(),
        "labels": torch.tensor([b["labels"] for b in batch]),
    }


def slow_pad(batch: list[dict[str, object]]) -> dict[str, torch.Tensor]:
    """Pad in Python lists, checking every token against the vocabulary (the slow way)."""
    longest = max(len(b["input_ids"]) for b in batch)  # type: ignore[arg-type]
    vocabulary = set(range(VOCAB))
    rows, masks = [], []
    for b in batch:
        tokens = [int(t) for t in b["input_ids"]]  # type: ignore[union-attr]
        for _ in range(1500):  # "validate" the tokens again and again
            tokens = [t if t in vocabulary else 0 for t in tokens]
        rows.append(tokens + [0] * (longest - len(tokens)))
        masks.append([1] * len(tokens) + [0] * (longest - len(tokens)))
    return {
        "input_ids": torch.tensor(rows),
        "attention_mask": torch.tensor(masks),
        "labels": torch.tensor([b["labels"] for b in batch]),
    }


def main() -> None:
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=VOCAB,
        hidden_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=256,
        max_position_embeddings=LENGTH,
        num_labels=2,
    )
    model = BertForSequenceClassification(config)
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(
            output_dir=out,
            max_steps=STEPS,
            per_device_train_batch_size=BATCH,
            gradient_accumulation_steps=ACCUMULATION,
            learning_rate=1e-3,
            logging_steps=10,
            eval_strategy="steps" if EVAL_STEPS else "no",
            eval_steps=EVAL_STEPS or None,
            save_strategy="steps" if SAVE_STEPS else "no",
            save_steps=SAVE_STEPS or 500,
            report_to=[],
            use_cpu=True,
            disable_tqdm=True,
        )
        trainer = Trainer(
            model=model,
            args=args,
            train_dataset=Tokens(4096),
            eval_dataset=Tokens(256) if EVAL_STEPS else None,
            data_collator=slow_pad if FAULT == "collator" else pad,
        )
        trainer.train()


if __name__ == "__main__":
    main()
