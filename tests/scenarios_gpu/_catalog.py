"""The GPU zoo's jobs: fault script -> the cause a GPU user would want named first, and the
healthy controls. ``benchmarks/gpu_zoo.py`` runs them on a machine with a CUDA GPU."""

from __future__ import annotations

#: Fault script -> (the planted cause, the stepdoctor rule that names it today or "" where
#: no rule does yet: issue 36 asks for them).
FAULTS: dict[str, tuple[str, str]] = {
    "g01_input_bound.py": ("input pipeline in the training process", "input-bound"),
    "g02_few_workers.py": ("too few DataLoader workers", "input-bound"),
    "g03_pageable_copies.py": ("pageable host-to-device copies", "h2d-copies"),
    "g04_sync_metrics.py": ("a host sync and CPU metrics every step", "slow-callbacks"),
    "g05_fp32_matmul.py": (
        "float32 matmuls on tensor cores (mixed precision off)",
        "tensor-core-precision",
    ),
    "g06_tf32_off.py": ("TF32 off for float32 matmuls", "tensor-core-precision"),
    "g07_small_batch.py": ("batches too small for the GPU", "small-batch"),
    "g08_launch_bound.py": ("many tiny kernels a step (launch-bound)", ""),
    "g09_cudnn_benchmark.py": ("cudnn.benchmark off with fixed shapes", ""),
    "g10_empty_cache.py": ("torch.cuda.empty_cache() every step", "slow-callbacks"),
}

HEALTHY = ("h01_cnn_resident.py", "h02_transformer_bf16.py", "h03_loader_workers.py")

#: Script -> ZOO_STEP_SCALE for its run under ``stepdoctor run``: (faulty, fixed), or
#: (healthy,). Each makes the run's steps last 1.5-3 s on an H200 (the step times of
#: 2026-11-28's zoo run), so that NVML's 100 ms readings see them; at scale 1 some ran 0.06 s.
RUN_SCALE: dict[str, tuple[int, ...]] = {
    "g01_input_bound.py": (1, 25),
    "g02_few_workers.py": (1, 20),
    "g03_pageable_copies.py": (2, 25),
    "g04_sync_metrics.py": (1, 3),
    "g05_fp32_matmul.py": (3, 17),
    "g06_tf32_off.py": (1, 3),
    "g07_small_batch.py": (1, 4),
    "g08_launch_bound.py": (2, 14),
    "g09_cudnn_benchmark.py": (6, 6),
    "g10_empty_cache.py": (4, 5),
    "h01_cnn_resident.py": (8,),
    "h02_transformer_bf16.py": (2,),
    "h03_loader_workers.py": (15,),
}
