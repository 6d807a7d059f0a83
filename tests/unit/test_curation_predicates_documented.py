"""docs/curation.md lists the predicates the shipped ontology gives meaning (issue 41):
the single-valued ones and those an agent may propose, exactly as ontology.json has them."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def documented(after: str, until: str) -> set[str]:
    text = (ROOT / "docs" / "curation.md").read_text()
    start = text.index(after)
    return set(re.findall(r"`([a-z_]+)`", text[start:text.index(until, start)]))


def test_the_curation_guide_lists_the_ontologys_predicates() -> None:
    ontology = json.loads((ROOT / "services" / "knowledge" / "ontology.json").read_text())
    assert documented("line replaces one):", "An agent's") == set(
        ontology["single_valued_predicates"])
    assert documented("should extend use them too:", "\n\n") == set(
        ontology["proposal_predicates"])
