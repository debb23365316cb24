"""The scenario zoo's catalogue: which script plants which fault, and the healthy controls.

One list for the zoo's tests (``test_zoo.py``) and the accuracy benchmark
(``benchmarks/accuracy.py``). Each fault script plants its fault strong or mild
(``ZOO_MAGNITUDE``) or runs fixed (``ZOO_FIXED=1``); its docstring says what each changes.
"""

from __future__ import annotations

__all__ = [
    "CONTROLS",
    "FAULTS",
    "FIXED_TWIN_ALARMS",
    "HEALTHY",
    "KNOWN_MISSES",
    "MAGNITUDES",
    "PLANTED_CODE",
]

#: The doses a fault script plants (``ZOO_MAGNITUDE``), strongest first.
MAGNITUDES = ("strong", "mild")

#: Fault script -> where its top finding must say the time goes (its first ``where`` site of
#: that phase): (phase, the planted function, the library call it makes or ""), from sampled
#: stacks; for memory growth, ("tensors", the planted groups of kept tensors, "|" between
#: them, what holds them) from the allocation window: the first group named must be one of
#: them. Checked at the strong dose.
PLANTED_CODE: dict[str, tuple[str, str, str]] = {
    "input_bound.py": ("data_wait", "decode", ""),
    "input_json.py": ("data_wait", "JsonRecords.parse", ""),
    "slow_callbacks.py": ("other", "after_step", "json.dumps"),
    "metric_python_loop.py": ("other", "token_accuracy", ""),
    "log_tensor.py": ("other", "after_step", "logging.Logger.info"),
    "checkpoint_stalls.py": ("checkpoint", "after_step", "torch.serialization.save"),
    "gc_pauses.py": ("gc", "after_step.<locals>.<genexpr>", ""),
    # the weight copies (one every 4th step), or the losses kept with their graphs where the
    # window's first half, short on a loaded machine, held no copy
    "memory_growth.py": (
        "tensors",
        "float32[1536, 256]|float32[] with MulBackward0",
        "list 'kept'",
    ),
}

#: Fault script -> the rule that must come out on top of the findings about the job.
FAULTS = {
    "input_bound.py": "input-bound",
    "input_json.py": "input-bound",
    "input_collate.py": "input-bound",
    "input_slow_storage.py": "input-bound",
    "input_augment_cnn.py": "input-bound",
    "slow_callbacks.py": "slow-callbacks",
    "metric_python_loop.py": "slow-callbacks",
    "log_tensor.py": "slow-callbacks",
    "rate_limiter.py": "slow-callbacks",
    "checkpoint_stalls.py": "checkpoint-stalls",
    "checkpoint_every_step.py": "checkpoint-stalls",
    "gc_pauses.py": "gc-pauses",
    "gc_collect_every_step.py": "gc-pauses",
    "cyclic_objects.py": "gc-pauses",
    "small_batch.py": "small-batch",
    "small_batch_cnn.py": "small-batch",
    "periodic_reshuffle.py": "step-outliers",
    "memory_growth.py": "memory-growth",
    "competing_processes.py": "competing-processes",
    "oversubscribed_threads.py": "thread-oversubscription",
    "shared_model_threads.py": "shared-model-threads",
    "float64.py": "float64",
    "default_dtype_float64.py": "float64",
    # issue 3: model checks on a real run
    "oversized_network.py": "oversized-network",
    "oversized_classes.py": "oversized-network",
    "inference_autograd.py": "autograd-in-inference",
    "inference_cnn_autograd.py": "autograd-in-inference",
    # issue 22: the classes that were missed
    "helper_processes.py": "helper-processes",
    "leak_outputs.py": "memory-growth",
    # issue 26: evaluation inside training
    "frequent_evaluation.py": "frequent-evaluation",
}

#: Fault scripts the rules do not catch today: script -> (the rule it plants, why it misses).
KNOWN_MISSES = {
    "step_outliers.py": (
        "step-outliers",
        "the evaluation pass every 40 steps is counted as evaluation and left out of the step "
        "shares, so no outlier remains (step-outliers info at most); frequent-evaluation names "
        "it instead (35% of the time at the strong dose, about its 20% line at the mild)",
    ),
    "inference_one_by_one.py": (
        "small-batch",
        "batch-1 inference: small-batch counts only optimizer, data and between-step time as "
        "per-step cost, and here the per-call cost is inside the forward (no finding)",
    ),
}

#: Fixed twins with a loud finding that is not a false alarm: script -> why.
FIXED_TWIN_ALARMS = {
    "small_batch.py": (
        "batch 64 of a 256-unit MLP: the next bottleneck shows, the DataLoader's per-sample "
        "indexing (input-bound warning, ~20% of the time)"
    ),
    "input_augment_cnn.py": (
        "the augmentation moved to one DataLoader worker: taking each batch from it (~1.3 ms "
        "of a ~23 ms step) and the refill at each epoch read as input-bound at 5-8%"
    ),
}

#: Healthy jobs: no warning or critical finding about the job.
HEALTHY = (
    "healthy_mlp.py",
    "healthy_workers.py",
    "healthy_cnn.py",
    "healthy_checkpoint.py",
    "healthy_manual.py",
    "healthy_accumulation.py",
    # issue 37: idle DataLoader workers beside a pool of one thread per core (once planted as
    # workers_oversubscription.py: its "fix", one thread and one worker, ran 1.5x slower)
    "healthy_idle_workers.py",
)

#: More healthy jobs for the benchmark's false-alarm rate (run --repeats times each): loop
#: shapes of test_step_model.py, which checks there that each raises no warning.
CONTROLS = ("loop_lbfgs.py", "loop_lm_eval.py")
