"""Reads the agent integration GUIDE (the contract seed) the integration tests check against."""

from __future__ import annotations

from pathlib import Path

import pytest

SEEDS = Path(__file__).resolve().parents[2].parent / "shared" / "seeds"


def guide_text() -> str:
    for path in sorted(SEEDS.glob("001_*.txt")):
        return path.read_text()
    pytest.skip(f"the GUIDE seed is not at {SEEDS}")


def section(title: str, next_title: str) -> str:
    text = guide_text()
    start = text.index(f"\n{title}\n") + len(title) + 2
    return text[start : text.index(f"\n{next_title}\n", start)]


def table_rows(block: str, first_column: str) -> list[list[str]]:
    """Tab-separated table rows after the header row that starts with ``first_column``."""
    lines = block.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith(first_column + "\t"))
    rows = []
    for line in lines[header + 1 :]:
        if "\t" not in line:
            break
        rows.append(line.split("\t"))
    return rows
