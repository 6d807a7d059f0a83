"""Every ``VERA_*`` setting the settings object accepts is documented under docs/ or in the
README, by its full name: a new setting fails here until it has a line (docs/configuration.md).

The names come from the model itself (prefix, nested delimiter, fields), not from a list.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel

from vera.config import Settings

ROOT = Path(__file__).resolve().parents[2]


def setting_names(model: type[BaseModel], prefix: str, delimiter: str) -> Iterator[str]:
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from setting_names(annotation, f"{prefix}{name.upper()}{delimiter}", delimiter)
        else:
            yield f"{prefix}{name.upper()}"


def all_setting_names() -> list[str]:
    config = Settings.model_config
    return sorted(setting_names(Settings, config["env_prefix"], config["env_nested_delimiter"]))


def documentation() -> str:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return "\n".join(page.read_text() for page in pages)


def undocumented(names: list[str], text: str) -> list[str]:
    """Names that never appear whole (``VERA_MCP__PORT`` inside ``VERA_MCP__PORTS`` is not it)."""
    return [n for n in names if not re.search(rf"(?<![A-Z0-9_]){re.escape(n)}(?![A-Z0-9_])", text)]


def test_the_names_are_the_ones_the_environment_sets(monkeypatch) -> None:
    names = all_setting_names()
    assert "VERA_RETRIEVAL__RANK__GUARD_MARGIN" in names and "VERA_ENVIRONMENT" in names
    # A derived name really is a variable the settings object reads.
    monkeypatch.setenv("VERA_RETRIEVAL__RANK__GUARD_MARGIN", "0.125")
    assert Settings().retrieval.rank.guard_margin == 0.125


def test_a_name_counts_only_when_written_whole() -> None:
    names = ["VERA_MCP__PORT", "VERA_API__PORT"]
    assert undocumented(names, "`VERA_MCP__PORTS` and VERA_API__PORT_X") == names
    assert undocumented(names, "| `VERA_MCP__PORT` | VERA_API__PORT=1 |") == []


def test_every_setting_is_documented() -> None:
    assert undocumented(all_setting_names(), documentation()) == []
