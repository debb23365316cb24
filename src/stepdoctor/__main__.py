"""``python -m stepdoctor``."""

from __future__ import annotations

from stepdoctor.cli import entry_point

if __name__ == "__main__":
    entry_point()
