"""``stepdoctor doctor``: check this machine and Python environment."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from stepdoctor.checkup import EXIT_CODES, checkup
from stepdoctor.cli import summary
from stepdoctor.cli._common import write_output

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the command."""
    p = sub.add_parser(
        "doctor",
        help=summary("doctor"),
        description=(
            "Check the machine and Python environment (backend, cuDNN, CPU features, "
            "threads, memory, other processes). Exit code: 0 fine (or info), 1 warning, "
            "2 critical."
        ),
    )
    p.add_argument("--json", type=Path, metavar="FILE", help="also write the answer as JSON")
    p.add_argument("--width", type=int, default=100, help="width of the text")
    p.set_defaults(handler=run)


def _load_renderers() -> None:
    import stepdoctor.render  # noqa: F401  (rich and the text layout: ~50 ms)


def run(args: argparse.Namespace) -> int:
    """Print the checks; return the exit code of the worst finding."""
    result = checkup(while_measuring=_load_renderers)
    from stepdoctor.render import render_checkup_json, render_checkup_text

    sys.stdout.write(render_checkup_text(result, width=args.width, color=sys.stdout.isatty()))
    if args.json is not None:
        write_output(args.json, render_checkup_json(result))
    worst = None if result.worst is None else result.worst.value
    return EXIT_CODES[worst]
