"""tf.data pipelines a framework is given: each batch's arrival timed, the pipeline described.

A compiled train step (Keras on TensorFlow) takes its batch from the pipeline inside its
graph, out of Python's sight. ``Arrivals.stamped`` ends the pipeline with a map that adds, in
the graph, the time each batch leaves the pipeline (``tf.timestamp()``) to a queue: TensorFlow
ops alone, so tf.data's threads take no Python lock and the step's call no extra work beyond
the enqueue. The stamps are read off the steps (``drain``: at each epoch's end), in order.

``describe`` reads the pipeline's stages (source, maps, batch, cache, prefetch), in tf.data's
terms, for the input-bound fix: which stages run Python, which handle one element at a time.

TensorFlow is imported by this module: the integrations that use it (Keras's on TensorFlow's
backend, hand-written TensorFlow loops') import it only once the job has imported TensorFlow.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from stepdoctor.integrations._timing import Setting

__all__ = [
    "QUEUE_CAPACITY",
    "Arrivals",
    "batch_size",
    "batch_size_of_stage",
    "can_stamp",
    "describe",
    "stages",
]

logger = logging.getLogger(__name__)

#: The stamps the queue can hold before ``drain`` empties it: an enqueue on a full queue would
#: stall the pipeline. 8 bytes a stamp (the queue grows as it fills): 2^30 steps of an epoch.
QUEUE_CAPACITY = 2**30
#: The ops by which a tf.data function runs Python: ``tf.py_function`` (``EagerPyFunc``),
#: ``tf.numpy_function`` (``PyFunc``), and ``from_generator``'s generator (run through them).
_PYTHON_OPS = frozenset({"EagerPyFunc", "PyFunc", "PyFuncStateless"})
#: tf.data's dataset classes by the method that makes them, for the stages' names (class
#: names are TensorFlow's own, with or without their leading underscore).
_METHODS = {
    "TensorSliceDataset": "from_tensor_slices",
    "TensorDataset": "from_tensors",
    "RangeDataset": "range",
    "MapDataset": "map",
    "ParallelMapDataset": "map",
    "BatchDataset": "batch",
    "ParallelBatchDataset": "batch",
    "PaddedBatchDataset": "padded_batch",
    "PrefetchDataset": "prefetch",
    "CacheDataset": "cache",
    "ShuffleDataset": "shuffle",
    "RepeatDataset": "repeat",
    "InterleaveDataset": "interleave",
    "ParallelInterleaveDataset": "interleave",
    "FlatMapDataset": "flat_map",
    "FilterDataset": "filter",
    "ZipDataset": "zip",
    "TakeDataset": "take",
    "SkipDataset": "skip",
    "UnbatchDataset": "unbatch",
    "TFRecordDatasetV2": "TFRecordDataset",
    "TextLineDatasetV2": "TextLineDataset",
}
#: Stages that apply a function to each element (their function may run Python; run without
#: ``num_parallel_calls`` they handle one element at a time).
_FUNCTION_STAGES = frozenset({"map", "interleave", "flat_map", "filter"})
#: Stages that take their elements in parallel: ``num_parallel_calls`` given.
_PARALLEL_CLASSES = frozenset({"ParallelMapDataset", "ParallelInterleaveDataset"})


def _kind(dataset: Any) -> str:
    """A dataset's class as tf.data names it, with or without its leading underscore
    (``_MapDataset``, ``CacheDataset``): ``MapDataset``."""
    return type(dataset).__name__.lstrip("_")


class Arrivals:
    """The time each batch leaves a tf.data pipeline, stamped in the graph."""

    def __init__(self) -> None:
        self._queue = tf.queue.FIFOQueue(QUEUE_CAPACITY, tf.float64, shapes=[()])

    def stamped(self, dataset: Any) -> Any:
        """``dataset`` with a map that stamps each element as it is made (the elements and
        their structure unchanged): before the pipeline's last ``prefetch``, whose thread then
        stamps each batch as it goes into the buffer, so a batch made ahead of the step that
        takes it shows no wait; at the end where there is none (tf.data then adds its own
        prefetch after it: its ``inject_prefetch``, on by default)."""
        upstream = getattr(dataset, "_input_dataset", None)
        buffer = getattr(dataset, "_buffer_size", None)
        last_is_prefetch = _kind(dataset) == "PrefetchDataset"
        if last_is_prefetch and upstream is not None and buffer is not None:
            try:
                return self._stamp(upstream).prefetch(int(buffer))  # -1: AUTOTUNE
            except Exception as exc:  # a prefetch that cannot be rebuilt: stamped after it
                logger.debug("stepdoctor: stamped after the last prefetch: %r", exc)
        return self._stamp(dataset)

    def _stamp(self, dataset: Any) -> Any:
        queue = self._queue
        # tf.data unpacks an element into the function's arguments where it is a plain tuple
        # (not a namedtuple): the same structure given back
        single = type(dataset.element_spec) is not tuple

        @tf.autograph.experimental.do_not_convert  # type: ignore[untyped-decorator]
        def stamp(*element: Any) -> Any:
            enqueued = queue.enqueue(tf.timestamp())
            with tf.control_dependencies([enqueued]):
                same = tf.nest.map_structure(tf.identity, element, expand_composites=True)
            return same[0] if single else same

        return dataset.map(stamp, name="stepdoctor_arrival")

    def drain(self, clock: Callable[[], int]) -> list[int]:
        """The stamps since the last ``drain``, in order, in ``clock``'s nanoseconds.

        ``tf.timestamp`` reads the wall clock (to the microsecond): each stamp is moved onto
        ``clock`` by the two clocks' difference now (their drift over an epoch, a clock
        adjustment's slew, is far below a step's time)."""
        count = int(self._queue.size())
        if not count:
            return []
        seconds = self._queue.dequeue_many(count).numpy()
        offset = clock() - time.time_ns()
        return [round(float(s) * 1e9) + offset for s in seconds]


#: Last stages after which no map may come (they hand batches to a device).
_LAST_ONLY = frozenset({"PrefetchToDeviceDataset", "CopyToDeviceDataset"})


def can_stamp(dataset: Any) -> bool:
    """Whether a map can be added at the pipeline's end: not after a stage that must stay
    last (``prefetch_to_device``)."""
    return _kind(dataset) not in _LAST_ONLY


def stages(dataset: Any) -> list[tuple[str, Any]]:
    """The pipeline's stages from its source to its end, each a tf.data method's name and the
    dataset object (following the first input of a stage with several, as ``zip``'s)."""
    found: list[tuple[str, Any]] = []
    current, seen = dataset, 0
    while current is not None and seen < 200:  # a pipeline is a chain; bounded all the same
        kind = _kind(current)
        found.append((_METHODS.get(kind, kind.removesuffix("Dataset") or kind), current))
        try:
            inputs = current._inputs()
        except Exception:  # a dataset kind that does not list its inputs: the chain ends here
            inputs = []
        current, seen = (inputs[0] if inputs else None), seen + 1
    found.reverse()
    return found


def _runs_python(stage: Any) -> bool:
    """Whether ``stage``'s function (a map's, an interleave's...) calls Python."""
    wrapper = getattr(stage, "_map_func", None) or getattr(stage, "_predicate", None)
    function = getattr(wrapper, "function", None)
    graph = getattr(function, "graph", None)
    if graph is None:
        return False
    try:
        return _graph_runs_python(graph)
    except Exception:  # a graph that cannot be read: not known to run Python
        return False


def _graph_runs_python(graph: Any) -> bool:
    for op in graph.get_operations():
        if op.type in _PYTHON_OPS:
            return True
    # functions called from it (a flat_map's dataset made by from_generator, tf.function calls)
    for function in getattr(graph, "_functions", {}).values():
        inner = getattr(function, "graph", None)
        if inner is not None and _graph_runs_python(inner):
            return True
        definition = getattr(function, "definition", None)
        if definition is not None and any(n.op in _PYTHON_OPS for n in definition.node_def):
            return True
    return False


def _parallel(stage: Any) -> bool:
    return _kind(stage) in _PARALLEL_CLASSES


def batch_size(dataset: Any) -> int | None:
    """The samples in a batch of ``dataset``: its last ``batch`` stage's size, where no stage
    after it changes the batch (None where it is not known)."""
    for method, stage in reversed(stages(dataset)):
        if method in ("batch", "padded_batch"):
            return batch_size_of_stage(stage)
        if method in ("unbatch", "flat_map", "interleave", "zip"):
            return None
    return None


def batch_size_of_stage(stage: Any) -> int | None:
    """A ``batch`` stage's size (None where it is computed in the graph)."""
    size = getattr(stage, "_batch_size", None)
    try:
        value = int(size) if size is not None else None
    except (TypeError, ValueError):
        return None
    return value if value and value > 0 else None


def describe(dataset: Any) -> dict[str, Setting]:
    """The pipeline in tf.data's terms, as settings for the fixes to read: ``pipeline`` (its
    stages, source first), ``pipeline_python`` (the stages that run Python: ``py_function``,
    ``numpy_function``, ``from_generator``), ``pipeline_sequential`` (functions applied to one
    element at a time: no ``num_parallel_calls``), ``pipeline_map_before_batch`` (a map
    applied per sample rather than per batch), ``pipeline_cache`` and ``pipeline_prefetch``
    (present or not)."""
    chain = stages(dataset)
    names: list[str] = []
    python: list[str] = []
    sequential: list[str] = []
    batched = False
    per_sample = False
    for made_by, stage in chain:
        method = made_by
        runs_python = method in _FUNCTION_STAGES and _runs_python(stage)
        if method == "flat_map" and runs_python and names in (["from_tensors"], ["range"]):
            method, names = "from_generator", []  # how tf.data builds a generator's dataset
        label = method
        if method in _FUNCTION_STAGES:
            notes = [
                *(["Python"] if runs_python else []),
                *(["parallel"] if _parallel(stage) else []),
            ]
            label += f" ({', '.join(notes)})" if notes else ""
            if method in ("map", "interleave") and not _parallel(stage):
                sequential.append(method)
            per_sample = per_sample or (method == "map" and not batched)
        elif method in ("batch", "padded_batch"):
            size = batch_size_of_stage(stage)
            label += f"({size})" if size else ""
        if runs_python or method == "from_generator":
            python.append(method)
        batched = batched or method in ("batch", "padded_batch")
        names.append(label)
    return {
        "pipeline": " > ".join(names),
        "pipeline_python": ", ".join(python) or None,
        "pipeline_sequential": ", ".join(sequential) or None,
        "pipeline_map_before_batch": per_sample and batched,
        "pipeline_cache": any(m == "cache" for m, _ in chain),
        "pipeline_prefetch": any(m == "prefetch" for m, _ in chain),
    }
