"""The command line: one module per command, ``main(argv) -> exit code``.

A command's module, and everything it imports (torch for ``doctor``, the collectors for
``run``, the statistics for ``compare``), is loaded only when that command runs: ``--version``
and ``--help`` read the table below and nothing else.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from stepdoctor._version import __version__
from stepdoctor.cli._common import EXIT_ERROR, EXIT_USAGE, error_line
from stepdoctor.errors import ScriptNotFoundError, StepdoctorError, UsageError

__all__ = ["COMMANDS", "build_parser", "entry_point", "main"]

#: Every command: the module that registers and runs it (``add_parser``), and the line
#: ``--help`` lists it with, in the order it lists them.
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("stepdoctor.cli.run", "run a Python training script under stepdoctor"),
    "report": ("stepdoctor.cli.report", "show the diagnosis of a saved run"),
    "compare": ("stepdoctor.cli.compare", "compare two saved runs (exit 1 on a regression)"),
    "doctor": (
        "stepdoctor.cli.doctor",
        "check this machine and Python environment for what slows training",
    ),
    "tune": (
        "stepdoctor.cli.tune",
        "run the script with one change at a time and report the fastest, measured",
    ),
    "trace": (
        "stepdoctor.cli.trace",
        "analyse PyTorch profiler traces (one file per rank), like HTA but faster",
    ),
    "logs": (
        "stepdoctor.cli.logs",
        "diagnose a JVM job from its DL4J training log and JVM GC logs",
    ),
}


def summary(command: str) -> str:
    """The line ``--help`` lists ``command`` with (its module's ``add_parser`` uses it too)."""
    return COMMANDS[command][1]


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """Return the argument parser: with every command's arguments, or, given the ``argv`` it
    will parse, with those of the command ``argv`` names alone (the others are listed by name
    and summary, their modules not loaded)."""
    parser = argparse.ArgumentParser(
        prog="stepdoctor",
        description="Why is my training slow, how much faster could it be, what to change.",
    )
    parser.add_argument("--version", action="version", version=f"stepdoctor {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = None if argv is None else _named_command(argv)
    for name, (module, line) in COMMANDS.items():
        if argv is None or name == chosen:
            importlib.import_module(module).add_parser(sub)
        else:
            sub.add_parser(name, help=line)
    return parser


def _named_command(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names: its first word that is not an option (the options before
    a command take no value), or None."""
    for arg in argv:
        if not arg.startswith("-"):
            return arg if arg in COMMANDS else None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    return _main(argv)[0]


def _main(argv: Sequence[str] | None) -> tuple[int, argparse.Namespace | None]:
    """Run the command line: the exit code, and the arguments it ran with (None when it ran
    no command)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if getattr(args, "handler", None) is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE, None
    try:
        code: int = args.handler(args)
    except StepdoctorError as exc:
        if args.debug:
            raise
        error_line(str(exc))
        return (
            EXIT_USAGE if isinstance(exc, (UsageError, ScriptNotFoundError)) else EXIT_ERROR
        ), args
    except KeyboardInterrupt:
        return 130, args
    return code, args


def entry_point() -> None:
    """Console-script entry point. A tuning run (``stepdoctor tune``'s child, which sets
    ``args.tuning_run``) ends without the interpreter's teardown (``end_without_teardown``)."""
    code, args = _main(None)
    if args is not None and getattr(args, "tuning_run", False):
        from stepdoctor.cli._exit import end_without_teardown

        end_without_teardown(code)
    sys.exit(code)
