"""Rules: one pure function per module, registered by ``@rule`` in ``RULES``."""

from __future__ import annotations

from stepdoctor.rules import (  # noqa: F401  (importing registers the rules)
    autograd_in_inference,
    checkpoint_stalls,
    comm_bound,
    competing_processes,
    cpu_fallback_ops,
    cpu_features,
    cudnn_disabled,
    dl4j_setup,
    eager_step,
    float64,
    frequent_evaluation,
    gc_pauses,
    gpu_idle,
    h2d_bound,
    h2d_copies,
    helper_processes,
    hot_kernel,
    input_bound,
    jvm_full_gcs,
    jvm_gc_failures,
    jvm_gc_overhead,
    jvm_long_pauses,
    launch_bound,
    memory_growth,
    memory_limits,
    oversized_network,
    shared_model_threads,
    slow_callbacks,
    small_batch,
    step_outliers,
    stragglers,
    sync_bound,
    tensor_core_alignment,
    tensor_core_precision,
    thread_oversubscription,
    wrong_backend,
)
from stepdoctor.rules._facts import keras_compiled, tensorflow_loop
from stepdoctor.rules._severity import temper, thin_evidence
from stepdoctor.rules.context import RuleContext, speedup_if_removed
from stepdoctor.rules.framework_terms import in_framework_terms
from stepdoctor.rules.registry import RULES, Rule, rank, rule, run_rules
from stepdoctor.rules.summary import split_warmup, summarize

__all__ = [
    "RULES",
    "Rule",
    "RuleContext",
    "in_framework_terms",
    "keras_compiled",
    "rank",
    "rule",
    "run_rules",
    "speedup_if_removed",
    "split_warmup",
    "summarize",
    "temper",
    "tensorflow_loop",
    "thin_evidence",
]
