"""A copy of what a wheel of this checkout is built from, for the install tests."""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# What the Dockerfile copies: the sources a wheel is built from.
SOURCES = ("pyproject.toml", "README.md", "src", "services", "gateway", "api")


def copy_sources(dest: Path) -> Path:
    dest.mkdir()
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, dest / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(source, dest / name)
    return dest
