"""Reads the agent integration GUIDE (the contract seed) the integration tests check against:
the excerpts copied into ``fixtures/guide_excerpts.txt`` (its header names their origin), so a
clean clone runs every test and none skips."""

from __future__ import annotations

from pathlib import Path

EXCERPTS = Path(__file__).resolve().parent / "fixtures" / "guide_excerpts.txt"


def guide_text() -> str:
    return EXCERPTS.read_text()


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
