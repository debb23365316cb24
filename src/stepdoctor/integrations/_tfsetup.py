"""TensorFlow's build and setup, read from the TensorFlow the job imported (given, never
imported here), as settings for the rules: for the Keras integration on TensorFlow's backend
and for hand-written loops."""

from __future__ import annotations

import logging
from typing import Any

from stepdoctor.integrations._timing import Setting

__all__ = ["tensorflow_settings"]

logger = logging.getLogger(__name__)


def tensorflow_settings(tf: Any) -> dict[str, Setting]:
    """TensorFlow's build and setup as the job runs it: CUDA/cuDNN it was built with, the GPUs
    it sees and whether each grows its memory (TensorFlow's default maps nearly all of a
    GPU's memory at start), XLA's auto-clustering, its thread pools (0: one per core)."""
    settings: dict[str, Setting] = {}
    try:
        build = dict(tf.sysconfig.get_build_info())
        settings["cuda_build"] = bool(build.get("is_cuda_build"))
        for key in ("cuda_version", "cudnn_version"):
            if build.get(key):
                settings[key] = str(build[key])
        gpus = tf.config.list_physical_devices("GPU")
        settings["gpus"] = len(gpus)
        if gpus:
            growth = [tf.config.experimental.get_memory_growth(g) for g in gpus]
            settings["memory_growth"] = all(bool(g) for g in growth)
        settings["xla_auto_jit"] = str(tf.config.optimizer.get_jit() or "off")
        settings["intra_op_threads"] = tf.config.threading.get_intra_op_parallelism_threads()
        settings["inter_op_threads"] = tf.config.threading.get_inter_op_parallelism_threads()
    except Exception as exc:  # a TensorFlow that does not say: the rules go without
        logger.debug("stepdoctor: could not read TensorFlow's setup: %r", exc)
    return settings
