"""Terraform (``*.tf``), parsed by ``python-hcl2``: the resources a module provisions
(``resource "aws_db_instance" "main"``: which database, cache or queue it runs on) and the
modules it uses (their ``source``).

The subject is the Terraform module, i.e. its folder of the repository. Only literal
strings are stated; a ``source`` computed from an expression is not.
"""

from __future__ import annotations

from collections.abc import Iterator

import hcl2
from lark import Token, Tree
from lark.exceptions import LarkError

from vera.harvest.facts import INFRASTRUCTURE, Document, Fact

PREDICATES = frozenset({"provisions", "uses_module"})


def wants(path: str) -> bool:
    return path.endswith(".tf")


def extract(doc: Document) -> Iterator[Fact]:
    try:
        tree = hcl2.parses_to_tree(doc.text)
    except (LarkError, ValueError, RecursionError):
        return
    subject = doc.subject_for_directory()
    for block in _children(_child(tree, "body"), "block"):
        kind = _identifier(block)
        labels = [_string(c) for c in block.children if isinstance(c, Tree) and c.data == "string"]
        if kind == "resource" and len(labels) == 2 and all(labels):
            address = f"{labels[0]}.{labels[1]}"
            yield doc.fact(subject, "provisions", address, block.meta.line, slot=address,
                           document_type=INFRASTRUCTURE, quote=labels[1])
        elif kind == "module" and len(labels) == 1 and labels[0]:
            for attribute in _children(_child(block, "body"), "attribute"):
                if _identifier(attribute) != "source":
                    continue
                terms = [c for c in attribute.children if isinstance(c, Tree)
                         and c.data == "expr_term"]
                source = _string(_child(terms[0], "string")) if terms else None
                if source:
                    yield doc.fact(subject, "uses_module", source, attribute.meta.line,
                                   slot=f"module:{labels[0]}", document_type=INFRASTRUCTURE)


def _child(tree: Tree | None, data: str) -> Tree | None:
    if tree is None:
        return None
    return next((c for c in tree.children if isinstance(c, Tree) and c.data == data), None)


def _children(tree: Tree | None, data: str) -> list[Tree]:
    if tree is None:
        return []
    return [c for c in tree.children if isinstance(c, Tree) and c.data == data]


def _identifier(tree: Tree) -> str:
    ident = _child(tree, "identifier")
    return str(ident.children[0]) if ident is not None and ident.children else ""


def _string(tree: Tree | None) -> str | None:
    """A literal string's text; None for one that interpolates (``"${var.x}"``)."""
    if tree is None:
        return None
    parts: list[str] = []
    for child in tree.children:
        if isinstance(child, Token):
            continue
        if child.data != "string_part" or not all(isinstance(t, Token) and t.type == "STRING_CHARS"
                                                  for t in child.children):
            return None
        parts.extend(str(t) for t in child.children)
    return "".join(parts)
