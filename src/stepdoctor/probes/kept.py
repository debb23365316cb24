"""What the probes keep for the rest of the boot, in the user's cache folder: py-cpuinfo's
answer (its child process takes ~1.2 s of a core) and the facts a fresh ``import torch``
decides (the doctor's; the import takes 2.4-2.9 s here). Each is kept under a key naming what
decides it; an answer kept under another key, or unreadable, is asked again.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from stepdoctor.model import EnvFact
from stepdoctor.probes.inputs import ENV_VARS, ProbeInputs, affinity, read_text

__all__ = [
    "CPUINFO_CACHE_FILE",
    "TORCH_CACHE_FILE",
    "TORCH_CUDA",
    "TORCH_DECIDED",
    "TORCH_KEY_VARS",
    "cpuinfo_kept",
    "cpuinfo_key",
    "keep",
    "keep_torch_facts",
    "kept_cpuinfo",
    "kept_torch_facts",
]

logger = logging.getLogger(__name__)

#: py-cpuinfo's answer, kept for the rest of the boot in the user's cache folder.
CPUINFO_CACHE_FILE = "cpuinfo.json"
#: The facts a process's ``import torch`` decides (torch's build, its defaults, the thread
#: pools it loads), and where the doctor keeps them for the rest of the boot: a later doctor
#: answers without importing torch (2.4-2.9 s here), as long as nothing that decides them has
#: changed (``kept_torch_facts``).
TORCH_DECIDED = ("torch.", "pools.")
TORCH_CACHE_FILE = "torch-facts.json"
#: Besides ``ENV_VARS``, variables that change what ``import torch`` decides: TF32 forced on,
#: ROCm's devices, libgomp's thread cap, which libraries load.
TORCH_KEY_VARS = (
    *ENV_VARS,
    "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "OMP_THREAD_LIMIT",
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
)
#: Device files of GPUs (NVIDIA's, WSL 2's, AMD's): one appearing or going changes the key.
_GPU_NODES = ("nvidia", "dxg", "kfd")
#: The source of the torch probe's ``gpu.capability`` (its CUDA devices'): kept with the rest.
TORCH_CUDA = "torch.cuda"


def cpuinfo_key(inputs: ProbeInputs) -> tuple[Path | None, dict[str, str | None]]:
    """Where py-cpuinfo's answer is kept (None: nowhere, this boot has no id) and its key.

    Raises:
        ImportError: py-cpuinfo is not installed.
    """
    boot = read_text(inputs.boot_id)
    path = _cache_path(inputs, CPUINFO_CACHE_FILE) if boot is not None else None
    return path, {"boot_id": boot, "cpuinfo_version": _cpuinfo_build()}


def _cpuinfo_build() -> str:
    """Which py-cpuinfo is installed, without importing it (its import, ~30 ms with the
    multiprocessing it loads, ran on every watched job's start beside the job): the size and
    modification time of its module file, which an upgrade or reinstall changes.

    Raises:
        ImportError: py-cpuinfo is not installed.
    """
    spec = importlib.util.find_spec("cpuinfo")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("No module named 'cpuinfo'")
    try:
        stat = os.stat(Path(next(iter(spec.submodule_search_locations))) / "cpuinfo.py")
    except OSError:  # laid out otherwise: its version string, imported
        import cpuinfo

        return str(getattr(cpuinfo, "CPUINFO_VERSION_STRING", "?"))
    return f"{stat.st_size}-{stat.st_mtime_ns}"


def kept_cpuinfo(path: Path | None, key: Mapping[str, object]) -> dict[str, Any] | None:
    """py-cpuinfo's answer kept at ``path`` under ``key`` (``cpuinfo_key``), if it has flags."""
    kept = _read_kept(path, key)
    flags = None if kept is None else kept.get("flags")
    if isinstance(flags, list) and all(isinstance(flag, str) for flag in flags):
        return kept
    return None


def cpuinfo_kept(inputs: ProbeInputs) -> bool:
    """Whether the cpuinfo probe will answer from what was kept earlier this boot (without
    py-cpuinfo's child process); False when that cannot be told (py-cpuinfo broken)."""
    try:
        return kept_cpuinfo(*cpuinfo_key(inputs)) is not None
    except Exception:  # the probe itself reports a broken py-cpuinfo as unknown
        return False


def _cache_path(inputs: ProbeInputs, name: str) -> Path | None:
    folder = inputs.cache_dir or _user_cache_dir(inputs.environ)
    return None if folder is None else folder / name


def _read_kept(path: Path | None, key: Mapping[str, object]) -> dict[str, Any] | None:
    """The answer kept at ``path`` if it was kept under ``key``; None if there is none, it was
    kept under another key, or it cannot be read."""
    if path is None:
        return None
    try:
        kept = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None  # none yet, or unreadable: ask again
    if isinstance(kept, dict) and all(kept.get(k) == v for k, v in key.items()):
        return kept
    return None


def keep(path: Path | None, answer: Mapping[str, object]) -> None:
    """Write ``answer`` (its key included) to ``path``; a reader never sees half a file, and a
    folder that cannot be written is passed over."""
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_name(f"{path.name}.{os.getpid()}.part")
        part.write_text(json.dumps(answer), "utf-8")
        os.replace(part, path)
    except OSError as exc:
        logger.debug("answer not kept in %s: %s", path, exc)


def _torch_install(inputs: ProbeInputs) -> dict[str, object] | None:
    """What decides the facts a fresh ``import torch`` gives, read without importing it: this
    boot, this interpreter, torch's installed files and the libraries it loads (theirs and the
    ``nvidia-*`` wheels': sizes and times, which a reinstall or an upgrade changes), the
    variables that size its threads, pick its devices or its libraries (``TORCH_KEY_VARS``),
    the GPU device files and the NVIDIA driver's version, the CPUs the process may use, and
    stepdoctor's version (which facts it reads). None when torch is not installed or this boot
    has no id."""
    boot = read_text(inputs.boot_id)
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if boot is None or spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations)))
    files = [
        folder / "__init__.py",
        folder / "version.py",
        *sorted(folder.glob("_C.*")),
        *sorted(folder.glob("lib/*")),
        *sorted(folder.parent.glob("nvidia/*/lib/*")),
    ]
    stats = []
    for path in files:
        try:
            st = path.stat()
        except OSError:
            continue
        stats.append([str(path), st.st_size, st.st_mtime_ns])
    try:
        devices = sorted(p.name for p in inputs.dev.iterdir() if p.name.startswith(_GPU_NODES))
    except OSError:
        devices = []
    from stepdoctor._version import __version__

    return {
        "boot_id": boot,
        "python": sys.executable,
        "stepdoctor": __version__,
        "torch_files": stats,
        "environ": {name: inputs.environ.get(name) for name in TORCH_KEY_VARS},
        "devices": devices,
        "nvidia_driver": read_text(inputs.nvidia_driver),
        "affinity": affinity(),
    }


def _torch_decided(fact: EnvFact) -> bool:
    """A fact the torch probe or the thread-pool probe gives after a fresh ``import torch``."""
    return fact.key.startswith(TORCH_DECIDED) or fact.source.startswith(TORCH_CUDA)


def kept_torch_facts(inputs: ProbeInputs) -> list[EnvFact] | None:
    """The facts an earlier doctor of this boot read after importing torch (``_torch_decided``),
    if nothing that decides them has changed since (``_torch_install``); else None."""
    key = _torch_install(inputs)
    kept = _read_kept(_cache_path(inputs, TORCH_CACHE_FILE), key) if key else None
    rows = kept.get("facts") if kept else None
    if not isinstance(rows, list):
        return None
    try:
        facts = [
            EnvFact(key=str(k), value=v, source=f"{src} (kept from earlier this boot)")
            for k, v, src in rows
            if isinstance(src, str) and (v is None or isinstance(v, str | int | float))
        ]
    except (TypeError, ValueError):
        return None
    facts = [f for f in facts if _torch_decided(f)]
    return facts if any(f.key == "torch.version" for f in facts) else None


def keep_torch_facts(inputs: ProbeInputs, facts: Iterable[EnvFact]) -> None:
    """Keep the facts a fresh ``import torch`` decided (the doctor's, read right after it) for
    later doctors of this boot."""
    key = _torch_install(inputs)
    rows = [[f.key, f.value, f.source] for f in facts if _torch_decided(f)]
    if key and any(row[0] == "torch.version" for row in rows):
        keep(_cache_path(inputs, TORCH_CACHE_FILE), {**key, "facts": rows})


def _user_cache_dir(environ: Mapping[str, str]) -> Path | None:
    """``$XDG_CACHE_HOME/stepdoctor``, else ``~/.cache/stepdoctor``; None without a home."""
    base = environ.get("XDG_CACHE_HOME") or (
        str(Path(environ["HOME"]) / ".cache") if environ.get("HOME") else None
    )
    return None if not base else Path(base) / "stepdoctor"
