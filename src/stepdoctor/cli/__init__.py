"""The command line: one module per command, ``main(argv) -> exit code``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from stepdoctor._version import __version__
from stepdoctor.cli import compare, doctor, logs, report, run, trace, tune
from stepdoctor.cli._common import EXIT_ERROR, EXIT_USAGE, error_line
from stepdoctor.errors import ScriptNotFoundError, StepdoctorError, UsageError

__all__ = ["COMMANDS", "entry_point", "main"]

#: Every command, in the order ``--help`` lists them.
COMMANDS = (run, report, compare, doctor, tune, trace, logs)


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser with every command."""
    parser = argparse.ArgumentParser(
        prog="stepdoctor",
        description="Why is my training slow, how much faster could it be, what to change.",
    )
    parser.add_argument("--version", action="version", version=f"stepdoctor {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "handler", None) is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        code: int = args.handler(args)
    except StepdoctorError as exc:
        if args.debug:
            raise
        error_line(str(exc))
        return EXIT_USAGE if isinstance(exc, (UsageError, ScriptNotFoundError)) else EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    return code


def entry_point() -> None:
    """Console-script entry point."""
    sys.exit(main())
