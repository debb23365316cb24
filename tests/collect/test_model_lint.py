"""describe_model on real torch modules: layers, kinds, FLOPs, and the model left as it was."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

import torch
from torch import nn

from stepdoctor.probes.model_lint import describe_model


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 9, padding=4), nn.BatchNorm2d(16), nn.ReLU(), nn.Dropout(0.5)
        )
        self.rnn = nn.LSTM(16, 32, num_layers=2, batch_first=True)
        self.head = nn.Linear(32, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = self.features(x).mean(dim=(2, 3))  # (N, 16)
        out, _ = self.rnn(f.unsqueeze(1))
        return self.head(out[:, -1])  # type: ignore[no-any-return]


def test_layers_kinds_and_sizes_of_a_real_model() -> None:
    info = describe_model(Net())
    by_name = {x.name: x for x in info.layers}
    assert by_name["features.0"].kind == "conv" and by_name["features.0"].kernel == (9, 9)
    assert (by_name["features.0"].in_features, by_name["features.0"].out_features) == (3, 16)
    assert by_name["rnn"].kind == "lstm" and by_name["rnn"].num_layers == 2
    assert by_name["rnn"].batch_first is True and by_name["rnn"].out_features == 32
    assert by_name["head"].kind == "linear" and by_name["head"].out_features == 5
    assert info.kinds == {
        "conv": 1,
        "batchnorm": 1,
        "activation": 1,
        "dropout": 1,
        "lstm": 1,
        "linear": 1,
    }
    assert info.param_count == sum(p.numel() for p in Net().parameters())
    assert info.buffer_dtypes == ("torch.float32", "torch.int64")  # BN stats and counter
    assert info.devices == ("cpu",) and info.training is True


def test_flops_per_sample_are_counted_and_the_model_is_left_unchanged() -> None:
    model = nn.Sequential(nn.Linear(10, 20), nn.BatchNorm1d(20), nn.Dropout(0.5))
    model.train()
    before = model[1].running_mean.clone()  # type: ignore[index]
    info = describe_model(model, example_input=torch.randn(8, 10))
    # A (8x10) @ (10x20) matmul is 2*8*10*20 FLOPs: 400 per sample (flop_counter counts
    # matmuls; the batch-norm's elementwise work is not counted).
    assert info.flops_per_sample == 400.0
    assert info.input_shape == (8, 10) and info.input_dtype == "torch.float32"
    assert all(m.training for m in model.modules())  # train mode restored
    assert torch.equal(model[1].running_mean, before)  # type: ignore[index]
    assert model[1].num_batches_tracked.item() == 0  # type: ignore[index]
