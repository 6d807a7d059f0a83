"""Knowledge's RPC groups build their responses only; every message inside one is built
by ``services/knowledge/convert.py`` (issue 46 item 1), so one view has one wire shape."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KNOWLEDGE = ROOT / "services" / "knowledge"


def inline_messages(source: str) -> list[str]:
    """The ``pb.<Message>(...)`` built in ``source`` that are not a ``...Response``."""
    return [node.func.attr for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "pb"
            and node.func.attr[:1].isupper() and not node.func.attr.endswith("Response")]


def test_the_check_sees_a_message_built_inline() -> None:
    source = "def f(v):\n    return pb.GetResponse(item=pb.Item(x=v), n=pb.FACT_STATE_ACTIVE)\n"
    assert inline_messages(source) == ["Item"]


def test_knowledge_rpc_groups_build_only_their_responses() -> None:
    groups = sorted(KNOWLEDGE.glob("*_api.py"))
    assert {p.name for p in groups} >= {"facts_api.py", "graph_api.py", "curation_api.py",
                                        "erasure_api.py"}
    found = {p.name: inline_messages(p.read_text()) for p in groups}
    assert found == {p.name: [] for p in groups}
