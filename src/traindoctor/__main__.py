"""``python -m traindoctor``."""

from __future__ import annotations

from traindoctor.cli import entry_point

if __name__ == "__main__":
    entry_point()
