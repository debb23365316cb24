"""Environment rules on built facts: each fires on its fault and stays silent when healthy."""

from __future__ import annotations

from stepdoctor.model import LoaderInfo, ModelInfo, Severity
from stepdoctor.rules import RULES, RuleContext
from stepdoctor.rules.cpu_features import cpu_features
from stepdoctor.rules.cudnn_disabled import cudnn_disabled
from stepdoctor.rules.memory_limits import memory_limits
from stepdoctor.rules.thread_oversubscription import thread_oversubscription
from stepdoctor.rules.wrong_backend import wrong_backend
from tests.builders import env, record, samples, steps

GIB = 2**30
# This machine's healthy facts, as the probes give them (2 cores, AVX-512, CPU-only torch).
HEALTHY = {
    "cpu__affinity": 2,
    "cpu__arch": "x86_64",
    "cpu__avx2": True,
    "cpu__avx512": True,
    "torch__version": "2.13.0+cpu",
    "torch__cuda_build": None,
    "torch__cuda_available": False,
    "torch__cpu_capability": "AVX512",
    "torch__num_threads": 2,
    "torch__mps_available": False,
    "torch__xpu_available": False,
    "gpu__device_nodes": 0,
    "mem__total_bytes": 24 * GIB,
    "mem__available_bytes": 23 * GIB,
    "mem__swap_used_bytes": 0,
    "mem__cgroup_limit_bytes": None,
    "shm__total_bytes": 12 * GIB,
    "pools__max_threads": 2,
}


def _ctx(
    models: tuple[ModelInfo, ...] = (), loaders: tuple[LoaderInfo, ...] = (), **facts: object
) -> RuleContext:
    return RuleContext(
        record((), cores=2, facts=env(**{**HEALTHY, **facts}), models=models, loaders=loaders)
    )


def _model(devices: tuple[str, ...] = ("cpu",), **kw: object) -> ModelInfo:
    return ModelInfo(
        model_id=1,
        class_name="Net",
        param_count=1000,
        param_bytes=4000,
        param_dtypes=("torch.float32",),
        devices=devices,
        **kw,  # type: ignore[arg-type]
    )


def test_healthy_machine_is_silent_for_every_environment_rule() -> None:
    ctx = _ctx()
    for rule in (
        wrong_backend,
        cudnn_disabled,
        cpu_features,
        memory_limits,
        thread_oversubscription,
    ):
        assert rule(ctx) == [], rule.__name__


def test_wrong_backend_cpu_only_torch_with_gpus_is_critical() -> None:
    (f,) = wrong_backend(_ctx(gpu__count=2, gpu__names="NVIDIA A100-SXM4-80GB"))
    assert f.severity is Severity.CRITICAL and "CPU-only torch" in f.title
    assert any(e.value == "NVIDIA A100-SXM4-80GB" for e in f.evidence)


def test_wrong_backend_cuda_build_that_cannot_reach_the_gpus() -> None:
    (f,) = wrong_backend(
        _ctx(gpu__device_nodes=1, torch__cuda_build="12.4", env__CUDA_VISIBLE_DEVICES="")
    )
    assert f.title == "torch cannot reach the GPUs"
    assert any(e.metric == "CUDA_VISIBLE_DEVICES" and e.value == "''" for e in f.evidence)


def test_wrong_backend_model_left_on_cpu_and_mps_unused() -> None:
    cuda = {"gpu__count": 1, "torch__cuda_build": "12.4", "torch__cuda_available": True}
    (f,) = wrong_backend(_ctx(models=(_model(),), **cuda))
    assert "runs on the CPU" in f.title and "model.to('cuda')" in f.fix.summary
    assert wrong_backend(_ctx(models=(_model(("cuda",)),), **cuda)) == []
    (mps,) = wrong_backend(_ctx(models=(_model(),), torch__mps_available=True))
    assert "mps" in mps.title


def test_cudnn_off_with_conv_layers_and_infos_on_ampere() -> None:
    cuda = {
        "torch__cuda_available": True,
        "torch__cudnn_available": True,
        "torch__cudnn_enabled": False,
        "torch__cudnn_benchmark": False,
        "torch__tf32_matmul": False,
        "gpu__capability": 8.0,
    }
    conv = _model(("cuda",), kinds={"conv": 3, "linear": 1})
    found = {(f.severity, f.title) for f in cudnn_disabled(_ctx(models=(conv,), **cuda))}
    assert (Severity.WARNING, "cuDNN is switched off") in found
    assert any("TF32" in title for _, title in found)
    assert any("tensor cores" in title for _, title in found)
    on = cudnn_disabled(_ctx(models=(conv,), **{**cuda, "torch__cudnn_enabled": True}))
    assert next(f.title for f in on) == "cudnn.benchmark is off for a convolutional model"
    assert all(f.severity is Severity.INFO for f in on)
    # A CPU job is not judged on cuDNN.
    assert cudnn_disabled(_ctx(models=(_model(kinds={"conv": 1}),), **cuda)) == []


def test_cpu_features_forced_down_missing_avx2_and_not_on_arm() -> None:
    (f,) = cpu_features(_ctx(torch__cpu_capability="AVX2", env__ATEN_CPU_CAPABILITY="avx2"))
    assert f.severity is Severity.WARNING and "ATEN_CPU_CAPABILITY=avx2" in f.explanation
    old = cpu_features(_ctx(cpu__avx2=False, cpu__avx512=False, torch__cpu_capability="DEFAULT"))
    assert [x.title for x in old] == ["The CPU has no AVX2"]
    (info,) = cpu_features(_ctx(cpu__avx512=False, torch__cpu_capability="AVX2"))
    assert info.severity is Severity.INFO
    assert cpu_features(_ctx(cpu__arch="aarch64", cpu__avx2=False)) == []


def test_cpu_features_name_the_jobs_own_library() -> None:
    """A Keras job on TensorFlow runs TensorFlow's kernels, not torch's."""
    (tf,) = cpu_features(_ctx(cpu__avx512=False, keras__backend="tensorflow"))
    assert "TensorFlow's fastest CPU kernels" in tf.explanation
    assert "torch CPU capability" not in {e.metric for e in tf.evidence}
    (torch,) = cpu_features(_ctx(cpu__avx512=False, torch__version="2.13.0"))
    assert "torch's fastest CPU kernels" in torch.explanation


def test_cpu_features_unread_flags_skip_the_check_saying_so() -> None:
    """py-cpuinfo out of time (a busy machine) leaves no flags: skipped, not "ok"."""
    check = RULES["cpu-features"]
    unread = check.missing(_ctx(cpu__avx2=None, cpu__avx512=None))
    assert unread is not None and unread.startswith("the CPU's flags were not read")
    assert check.missing(_ctx()) is None
    assert check.missing(_ctx(cpu__arch="aarch64", cpu__avx2=None)) is None  # not judged there


def test_memory_limits_rss_near_cgroup_limit_swap_and_small_shm() -> None:
    s = steps(50, phases_ms={"forward": 10})
    near = record(
        s,
        cores=2,
        system=samples(s, rss=int(3.7 * GIB)),
        facts=env(**{**HEALTHY, "mem__cgroup_limit_bytes": 4 * GIB}),
    )
    (f,) = memory_limits(RuleContext(near))
    assert f.severity is Severity.CRITICAL and "92%" in f.title
    (swap,) = memory_limits(_ctx(mem__swap_used_bytes=2 * GIB))
    assert "swap" in swap.title
    workers = (LoaderInfo(loader_id=1, num_workers=4, batch_size=64),)
    (shm,) = memory_limits(_ctx(loaders=workers, shm__total_bytes=64 * 2**20))
    assert shm.severity is Severity.CRITICAL and "64 MiB" in shm.title
    # No workers in the job: a small /dev/shm does not matter.
    no_workers = (LoaderInfo(loader_id=1, num_workers=0, batch_size=64),)
    assert memory_limits(_ctx(loaders=no_workers, shm__total_bytes=64 * 2**20)) == []
    (low,) = memory_limits(_ctx(mem__available_bytes=1 * GIB))
    assert "available" in low.title


def test_ranks_pinned_to_cores_of_their_own_are_not_oversubscribed() -> None:
    """Each of 2 ranks pinned to one of 2 cores, one thread each: nothing shares its core (a
    real pinned job read "2 compute threads on 1 cores"); 4 ranks pinned over 2 cores do
    share."""
    pinned = {"cpu__affinity": 1, "torch__num_threads": 1, "env__OMP_NUM_THREADS": "1"}
    assert thread_oversubscription(_ctx(env__LOCAL_WORLD_SIZE="2", **pinned)) == []
    (f,) = thread_oversubscription(_ctx(env__LOCAL_WORLD_SIZE="4", **pinned))
    assert f.title == "2 compute threads on 1 cores"
    assert {e.metric: e.value for e in f.evidence}["ranks sharing its cores"] == 2


def test_thread_oversubscription_static_ranks_and_unset_omp() -> None:
    (f,) = thread_oversubscription(_ctx(env__LOCAL_WORLD_SIZE="4"))
    assert f.severity is Severity.WARNING and f.title == "8 compute threads on 2 cores"
    assert "torch.set_num_threads(1)" in f.fix.summary
    big = RuleContext(
        record(
            (),
            cores=16,
            facts=env(
                **{
                    **HEALTHY,
                    "cpu__affinity": 16,
                    "torch__num_threads": 4,
                    "env__LOCAL_WORLD_SIZE": "2",
                }
            ),
        )
    )
    (info,) = thread_oversubscription(big)
    assert info.severity is Severity.INFO and "OMP_NUM_THREADS unset" in info.title
