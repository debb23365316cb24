"""A run's sampled stacks as a speedscope profile (https://www.speedscope.app, its file format:
``https://www.speedscope.app/file-format-schema.json``).

One ``sampled`` profile per phase — the phase the job's loop was in when each sample was taken,
and the DataLoader workers' own — with the samples in time order, each one sample's weight;
frames carry their file and ``def`` line. speedscope opens it offline (``npx speedscope FILE``,
or the web app, which reads the file in the browser without sending it anywhere).
"""

from __future__ import annotations

import json
from typing import Any

from stepdoctor.model import RunRecord
from stepdoctor.render.names import PHASE_LABELS, phase_label

__all__ = ["SCHEMA", "record_to_speedscope", "render_speedscope"]

SCHEMA = "https://www.speedscope.app/file-format-schema.json"


def render_speedscope(record: RunRecord, *, exporter: str = "stepdoctor") -> str:
    """Return the profile as JSON text."""
    data = record_to_speedscope(record, exporter=exporter)
    return json.dumps(data, separators=(",", ":"), allow_nan=False) + "\n"


def record_to_speedscope(record: RunRecord, *, exporter: str = "stepdoctor") -> dict[str, Any]:
    """Return the profile as JSON values; a record without samples gives no profiles."""
    frame_index: dict[int, int] = {}
    frames: list[dict[str, Any]] = []
    for f in record.frames:
        frame_index[f.id] = len(frames)
        frames.append({"name": f.function, "file": f.file, "line": f.line})
    stacks = {s.id: s.frames for s in record.stacks}
    by_phase: dict[str, list[list[int]]] = {}
    for sample in sorted(record.samples, key=lambda s: s.t_ns):
        ids = stacks.get(sample.stack)
        if ids is None or any(i not in frame_index for i in ids):
            continue
        by_phase.setdefault(sample.phase, []).append([frame_index[i] for i in ids])
    order = list(PHASE_LABELS)
    phases = sorted(by_phase, key=lambda p: (order.index(p) if p in order else len(order), p))
    profiles = [
        {
            "type": "sampled",
            "name": f"{phase_label(phase)} ({len(by_phase[phase])} samples)",
            "unit": "none",
            "startValue": 0,
            "endValue": len(by_phase[phase]),
            "samples": by_phase[phase],
            "weights": [1] * len(by_phase[phase]),
        }
        for phase in phases
    ]
    return {
        "$schema": SCHEMA,
        "name": "stepdoctor: " + (" ".join(record.meta.command) or record.meta.run_id),
        "exporter": exporter,
        "activeProfileIndex": 0,
        "shared": {"frames": frames},
        "profiles": profiles,
    }
