"""What a watched run is made of: its metadata, steps, samples and facts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from stepdoctor.model.phases import Phase
from stepdoctor.model.stacks import AllocationSite, CodeFrame, CodeStack, StackSample

if TYPE_CHECKING:  # resolved by model/schema.py when a record is read: a job's start-up
    # need not build the classes of the JVM logs (the record's writer loads BoundVerdict)
    from stepdoctor.model.experiments import BoundVerdict
    from stepdoctor.model.jvm import JvmGcLog

__all__ = [
    "GENERATOR_MADE",
    "GENERATOR_WAIT",
    "NEW_ITERATOR",
    "OWN_MEASUREMENTS",
    "PIPELINE_WAIT",
    "PRODUCER_PHASE",
    "PYDATASET_MADE",
    "TOP_OTHERS_MIN_PCT",
    "WARMUP_SAMPLES",
    "ConcurrencyStat",
    "EnvFact",
    "GpuProcess",
    "GpuSample",
    "LayerInfo",
    "LoaderInfo",
    "ModelInfo",
    "Notice",
    "ProcessUsage",
    "ProfiledSpan",
    "RunEnd",
    "RunMeta",
    "RunRecord",
    "StepTiming",
    "SystemSample",
]

#: A run's first samples are warm-up (start-up, the first DataLoader workers' spawn, allocator
#: and cache warm-up): SageMaker Debugger's bottleneck rules skip the first 1,000. The rules'
#: shares leave them out, and the in-run experiments and trace capture wait for them.
WARMUP_SAMPLES = 1000

#: ``HookTime.phase`` of the time a framework's input pipeline took to make its batches on a
#: thread of its own, beside the steps (Keras on TensorFlow: the Python generator given to
#: ``fit``, run by tf.data): in no phase of the steps.
PRODUCER_PHASE = "input_producer"
#: ``HookTime.name`` in ``PRODUCER_PHASE`` of the time to make each batch of ``fit``'s
#: generator, and of each compiled step's wait for its batch (``integrations/keras.py``'s
#: ``FusedWaits``), which the input-bound rule reads.
GENERATOR_MADE = "fit's generator: next batch"
#: ``HookTime.name`` in ``PRODUCER_PHASE`` of each batch a ``keras.utils.PyDataset`` given to
#: ``fit`` made (its ``__getitem__``, run by tf.data's thread); the steps' waits for them are
#: ``GENERATOR_WAIT``'s.
PYDATASET_MADE = "fit's PyDataset: __getitem__"
#: ``HookTime.name`` in ``data_wait`` of each new iterator a hand-written TensorFlow loop made
#: of its tf.data pipeline (``for x in dataset``, once an epoch): tf.data rewrites the
#: pipeline's graph and starts its threads (``integrations/tensorflow.py``).
NEW_ITERATOR = "tf.data: a new iterator"
GENERATOR_WAIT = "fit's generator: step waits for its batch"
#: ``HookTime.name`` in ``PRODUCER_PHASE`` of each compiled step's wait for its batch from the
#: tf.data pipeline given to ``fit`` (stamped in the graph as each batch leaves it:
#: ``integrations/_tfdata.py``).
PIPELINE_WAIT = "fit's tf.data pipeline: step waits for its batch"

#: The least CPU (% of one core) over a listing's interval for a process outside the job to
#: be named in ``SystemSample.top_others``: a shell or a monitoring agent ticking over stays
#: out of the report's "top other processes".
TOP_OTHERS_MIN_PCT = 5.0


@dataclass(frozen=True, slots=True, kw_only=True)
class RunMeta:
    """Who ran what, where. Written once, first, in the run record."""

    run_id: str
    started_unix_s: float
    command: tuple[str, ...] = ()
    cwd: str = ""
    hostname: str = ""
    pid: int = 0
    python_version: str = ""
    stepdoctor_version: str = ""
    cpu_count: int = 0
    affinity_cores: int = 0
    total_memory_bytes: int = 0
    clock_origin_ns: int = 0
    """``perf_counter_ns()`` at the start; every ``*_ns`` time in the record is on that clock."""
    rank: int | None = None
    """The process's rank in a distributed job (``RANK``, as torchrun sets it), or None."""
    local_rank: int | None = None
    """Its rank on its host (``LOCAL_RANK``)."""
    world_size: int | None = None
    """The job's number of ranks (``WORLD_SIZE``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StepTiming:
    """One step: from the end of the previous step boundary to the end of this one.

    A training step is one parameter update (DESIGN.md, "What a step is"); an inference-only
    job's step is one call of its model. Evaluation done between training steps lies inside
    the step's span as the ``evaluation`` phase and is left out of its ``duration_ns``.
    """

    index: int
    start_ns: int
    end_ns: int
    boundary: str
    """How the step was found: ``optimizer`` (a step of the first optimizer), ``backward``
    (no optimizer: the next training pass after a backward, as in loops that update the
    parameters by hand), ``explicit`` (``doc.step()``) or ``model`` (inference: one call of
    the model)."""
    batch_size: int | None = None
    phase_ns: Mapping[str, int] = field(default_factory=dict)
    gc_count: int = 0
    gc_pause_ns: int = 0
    gc_max_pause_ns: int = 0
    gc_phase_ns: Mapping[str, int] = field(default_factory=dict)
    """GC pause time by the phase it interrupted (pauses on the step's own thread)."""
    micro_batches: int = 0
    """Backward passes outside the optimizer's step: more than one is gradient accumulation."""
    closure_passes: int = 0
    """Backward passes inside the optimizer's step (a closure optimizer such as LBFGS)."""
    eval_calls: int = 0
    """Calls of the trained model without autograd (evaluation) inside the step's span."""

    @property
    def wall_ns(self) -> int:
        """Wall time from the step's start to its end, evaluation included, in nanoseconds."""
        return self.end_ns - self.start_ns

    @property
    def duration_ns(self) -> int:
        """Training time of the step in nanoseconds: its wall time less the evaluation done
        inside it (what step statistics and throughput are made of)."""
        return self.end_ns - self.start_ns - self.phase_ns.get("evaluation", 0)

    def phase(self, phase: Phase | str) -> int:
        """Return the nanoseconds spent in ``phase`` (0 when absent)."""
        return self.phase_ns.get(str(phase), 0)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessUsage:
    """CPU use of one process: another process on the machine, or one of the job's children."""

    pid: int
    name: str
    cpu_pct: float
    """Percent of one core (200 = two cores busy)."""
    command: str = ""
    """Its command line, arguments joined by spaces and cut to ``COMMAND_MAX`` characters
    (``collect/sampling/procfs.py``); empty where it has none (a kernel thread) or it could
    not be read, and in records written before it was read."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SystemSample:
    """One reading of the machine and of the job's process tree.

    CPU percentages are of one core (``job_cpu_pct`` 150 = one and a half cores busy).
    Disk and network counters are cumulative bytes since boot; ``None`` where unreadable.
    """

    t_ns: int
    cpu_pct_per_core: tuple[float, ...] = ()
    job_cpu_pct: float | None = None
    children_cpu_pct: float | None = None
    """CPU of the job's child processes alone (DataLoader workers)."""
    job_rss_bytes: int | None = None
    """RSS of the whole tree (the job's process and its children)."""
    main_rss_bytes: int | None = None
    """RSS of the job's own process alone."""
    main_heap_bytes: int | None = None
    """Bytes the job's own process holds allocated from glibc's malloc (``mallinfo2``: in
    use, not what the allocator keeps cached); None where unreadable (other libc, another
    malloc preloaded) or not read at this sample."""
    main_thread_cpu_s: float | None = None
    """CPU seconds the job's main thread (where the training loop runs) has used since it
    started, read with the heap; None where unreadable or not read at this sample."""
    main_run_delay_s: float | None = None
    """Seconds the job's main thread has spent runnable but waiting for a CPU since it
    started (``/proc/<pid>/schedstat``'s run delay: the time other threads and processes held
    the cores it could run on), read with the heap; None where unreadable or not read."""
    job_threads: int | None = None
    job_processes: int | None = None
    other_cpu_pct: float | None = None
    """CPU of the processes outside the job: neither its tree nor its other ranks."""
    ranks_cpu_pct: float | None = None
    """In a distributed job, the CPU of its other ranks on this host (and of the launcher
    that started them); None outside one."""
    disk_read_bytes: int | None = None
    disk_write_bytes: int | None = None
    net_sent_bytes: int | None = None
    net_recv_bytes: int | None = None
    cpu_mhz: float | None = None
    """The CPUs' mean current clock (``psutil.cpu_freq``), read with disk/net; None where
    unreadable or not read at this sample."""
    top_others: tuple[ProcessUsage, ...] = ()
    """The processes outside the job that used ``TOP_OTHERS_MIN_PCT`` of a core or more since
    the previous listing of every process (at most five, the busiest first); filled where a
    listing ran (at the run's start, every ``WALK_EVERY_NS`` (10 s) and at its end: the
    first primes the counters), empty in the samples between."""
    job_children: tuple[ProcessUsage, ...] = ()
    """Each of the job's child processes (DataLoader workers, processes it started itself) with
    its CPU since the previous such reading; filled every ``SCAN_EVERY_NS`` (2 s) while the job
    has children, empty in the samples between."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuProcess:
    """A process holding memory on a GPU."""

    pid: int
    name: str
    mem_bytes: int | None
    is_job: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuSample:
    """One NVML reading of one GPU."""

    t_ns: int
    index: int
    name: str = ""
    util_pct: float | None = None
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    processes: tuple[GpuProcess, ...] = ()
    sm_clock_mhz: int | None = None
    max_sm_clock_mhz: int | None = None
    clock_reasons: int | None = None
    """NVML's clock event (throttle) reasons, a bit mask (``nvml.CLOCK_REASONS``)."""
    temperature_c: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LoaderInfo:
    """How a DataLoader was configured (seen when it was iterated)."""

    loader_id: int
    num_workers: int
    batch_size: int | None = None
    pin_memory: bool = False
    prefetch_factor: int | None = None
    persistent_workers: bool = False
    dataset_type: str = ""
    dataset_len: int | None = None
    multiprocessing_context: str | None = None
    getitem_at: str = ""
    """``path:line`` of the data set's ``__getitem__`` (its class's Python code; empty for a
    built-in one): where each sample is prepared."""
    collate_fn: str = ""
    """The loader's own ``collate_fn`` as ``name (path:line)`` (empty for torch's default):
    where each batch is put together, a Hugging Face Trainer's data collator, say."""
    auto_collation: bool | None = None
    """Whether the loader fetches samples one by one and collates them (a ``batch_size`` or a
    ``batch_sampler``); False when it hands the sampler's indices to the data set at once
    (``batch_size=None``: a data set that returns whole batches); None: unknown."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LoaderWorker:
    """A DataLoader worker process (seen when its loader started its workers)."""

    pid: int
    loader_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerInfo:
    """One layer of a model whose size the model rules judge (conv, dense, recurrent,
    embedding); other layers are only counted."""

    name: str
    """Qualified name inside the model, e.g. ``encoder.layers.3.linear1``."""
    kind: str
    """``conv``, ``linear``, ``lstm``, ``gru``, ``rnn``, ``embedding``."""
    params: int
    in_features: int | None = None
    """Dense: in_features; conv: in_channels; recurrent: input_size; embedding: dim."""
    out_features: int | None = None
    """Dense: out_features (units); conv: out_channels; recurrent: hidden_size; embedding:
    number of embeddings."""
    kernel: tuple[int, ...] = ()
    num_layers: int = 1
    """Stacked layers of a recurrent module."""
    batch_first: bool | None = None
    """Recurrent modules: whether inputs are (batch, time, features)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelInfo:
    """An outermost model the job called (or ``stepdoctor.lint`` was given), inspected once
    off the hot path."""

    model_id: int
    class_name: str
    param_count: int
    param_bytes: int
    param_dtypes: tuple[str, ...] = ()
    buffer_dtypes: tuple[str, ...] = ()
    devices: tuple[str, ...] = ()
    """Devices of parameters and buffers (``cpu``, ``cuda``...)."""
    module_count: int = 0
    layers: tuple[LayerInfo, ...] = ()
    kinds: Mapping[str, int] = field(default_factory=dict)
    """Count of leaf modules by kind (``conv``, ``linear``, ``lstm``, ``dropout``, ``norm``,
    ``activation``, ``other``...)."""
    training: bool | None = None
    """The model's train/eval mode when inspected."""
    input_shape: tuple[int, ...] = ()
    """Shape of the first tensor passed to the model (batch first), when seen."""
    input_dtype: str | None = None
    autocast: str | None = None
    """At its first call: the autocast dtype in force on its device (``torch.bfloat16``...),
    ``off`` when none was, None when not known."""
    float32_matmul: str | None = None
    """At its first call: ``torch.get_float32_matmul_precision()`` (``highest``: float32
    matmuls in full float32; ``high``/``medium``: TF32 or bf16 on tensor cores)."""
    flops_per_sample: float | None = None
    """Forward FLOPs per sample (torch.utils.flop_counter), when an example input was given."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvFact:
    """One fact about the environment, e.g. ``torch.num_threads = 2``."""

    key: str
    value: str | int | float | bool | None
    source: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConcurrencyStat:
    """How the job called one model: which threads entered its forward at once, and in
    which autograd and train/eval mode."""

    model_id: int
    class_name: str
    calls: int
    threads: int
    max_concurrent: int
    concurrent_calls: int
    solo_mean_ns: float | None = None
    concurrent_mean_ns: float | None = None
    grad_calls: int = 0
    """Calls made with autograd enabled (``torch.is_grad_enabled()``)."""
    train_mode_calls: int = 0
    """Calls made while the model was in train mode (``model.training``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Notice:
    """Something stepdoctor itself ran into while watching (a reader failed, say)."""

    t_ns: int
    level: str
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Collective:
    """One collective of a rank as PyTorch's Flight Recorder kept it (``probes/flight.py``)."""

    seq: int
    """Its number in its process group (``collective_seq_id``): the same collective has the
    same number on every rank."""
    op: str
    """``gloo:all_reduce``, ``nccl:broadcast``..."""
    state: str
    """``scheduled``, ``started`` or ``completed``."""
    sizes: str = ""
    """Its input tensors' shapes and dtypes, as ``float32[1115146]``."""
    group: str = ""
    created_unix_ns: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class HookTime:
    """The time a training framework spent in one of its hooks over the run (a Lightning
    callback's ``on_train_batch_end``, a Hugging Face ``Trainer.log``), as its integration
    timed it (``stepdoctor.integrations``)."""

    name: str
    """``ModelCheckpoint.on_train_batch_end``, ``Trainer.log``..."""
    phase: str
    """The phase its time was counted in (``callbacks``, ``evaluation``, ``checkpoint``...), or
    ``PRODUCER_PHASE``: work on another thread, beside the steps, in none of their phases."""
    calls: int
    total_ns: int


@dataclass(frozen=True, slots=True, kw_only=True)
class DdpStats:
    """What a ``DistributedDataParallel`` model's own logger measured (its
    ``_get_ddp_logging_data()``, read when the run ends): averages over the iterations it
    sampled (every 10th of the first ones, then fewer), in nanoseconds, and its settings."""

    model: str
    """The wrapped module's class."""
    iterations: int
    """The iteration of its last sample."""
    forward_ns: int | None = None
    backward_compute_ns: int | None = None
    backward_comm_ns: int | None = None
    """From the first gradient bucket's all-reduce launched to the last one done: it includes
    waiting for the other ranks, who all finish a collective together."""
    overlap_ns: int | None = None
    """Of the communication, the part that ran while backward still computed."""
    bucket_cap_bytes: int | None = None
    find_unused_parameters: bool | None = None
    static_graph: bool | None = None
    gradient_as_bucket_view: bool | None = None
    comm_hook: str = ""
    backend: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProfiledSpan:
    """A stretch of the run that stepdoctor's own torch.profiler capture slowed
    (``run --trace``): from the profiler's first recorded step to the end of writing its trace.
    The steps in it are the job's, but inflated by the profiler (15-45% a step)."""

    start_ns: int
    end_ns: int
    what: str = "torch.profiler"

    @property
    def label(self) -> str:
        """What stepdoctor ran there, in words (``what`` where it is not a known kind)."""
        return OWN_MEASUREMENTS.get(self.what, self.what)


#: stepdoctor's own measurements that slow the job while they run (``ProfiledSpan.what``), as
#: the summary and the timelines name them.
OWN_MEASUREMENTS: Final[dict[str, str]] = {
    "torch.profiler": "torch.profiler capture (--trace)",
    "tracemalloc": "allocation tracing (tracemalloc, to find where objects are made)",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class RunEnd:
    """How the job ended."""

    t_ns: int
    status: str
    """``ok``, ``exit`` (SystemExit), ``exception``, ``interrupted`` (Ctrl-C), ``stopped`` (the
    step limit of a ``stepdoctor tune`` trial: not the job's failure)."""
    exit_code: int = 0
    error: str = ""
    """The exception's type and message (``ValueError: boom``); empty when none was raised."""
    error_at: str = ""
    """``path:line`` of the innermost frame of the job's own code (not Python's, a library's or
    stepdoctor's) where the exception was raised, ``sys.exit`` called or Ctrl-C landed; empty
    when unknown (records written before it was recorded have none)."""
    monitor_cpu_ns: int | None = None
    """CPU time stepdoctor's monitor thread used (sampling, reducing, writing): its own
    overhead, off the hot path."""
    stacks_cpu_ns: int | None = None
    """CPU time stepdoctor's stack sampler used: its thread, or the py-spy process (None: no
    stacks were sampled)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRecord:
    """Everything known about a run; what the rules read."""

    meta: RunMeta
    steps: tuple[StepTiming, ...] = ()
    system: tuple[SystemSample, ...] = ()
    gpu: tuple[GpuSample, ...] = ()
    loaders: tuple[LoaderInfo, ...] = ()
    loader_workers: tuple[LoaderWorker, ...] = ()
    """The DataLoader worker processes the job started (its other children are helpers)."""
    models: tuple[ModelInfo, ...] = ()
    env: tuple[EnvFact, ...] = ()
    batch_dtypes: tuple[str, ...] = ()
    concurrency: tuple[ConcurrencyStat, ...] = ()
    notices: tuple[Notice, ...] = ()
    experiments: tuple[BoundVerdict, ...] = ()
    """Data-only / compute-only measurements made during the run (``--experiments``)."""
    profiled: tuple[ProfiledSpan, ...] = ()
    """Where stepdoctor's own profiler capture ran (``--trace``): the summary and the rules
    leave those steps out (``model.measured.profiled_steps``)."""
    frames: tuple[CodeFrame, ...] = ()
    """The functions seen in sampled stacks."""
    stacks: tuple[CodeStack, ...] = ()
    samples: tuple[StackSample, ...] = ()
    """Sampled stacks of the job's loop thread (and of its DataLoader workers), each with
    the phase it fell in."""
    allocations: tuple[AllocationSite, ...] = ()
    """Lines whose allocations outlived a traced window (GC pressure, memory growth)."""
    ddp: tuple[DdpStats, ...] = ()
    """Each DistributedDataParallel model's own timings (a rank of a distributed job)."""
    collectives: tuple[Collective, ...] = ()
    """A rank's last collectives, from the Flight Recorder, as read last (when its steps
    stalled, or at its end)."""
    hooks: tuple[HookTime, ...] = ()
    """A training framework's hooks and the time spent in each (Lightning, the Hugging Face
    Trainer, Keras), as last written; the framework and its settings are ``env`` facts
    (``framework``, ``lightning.log_every_n_steps``...)."""
    jvm_gc: tuple[JvmGcLog, ...] = ()
    """The JVM's GC logs of a job read from its logs (``stepdoctor logs``)."""
    from_logs: bool = False
    """Read from a JVM job's logs (``stepdoctor logs``), not recorded by watching it: no
    end, no samples, no model are to be expected."""
    end: RunEnd | None = None
    warnings: tuple[str, ...] = ()
    """Problems met while loading the record (truncated tail, say)."""

    def env_value(self, key: str) -> str | int | float | bool | None:
        """Return the last recorded value of environment fact ``key`` (None when absent)."""
        for fact in reversed(self.env):
            if fact.key == key:
                return fact.value
        return None
