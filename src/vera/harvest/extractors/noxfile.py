"""``noxfile.py``: the sessions nox runs, read from the file's syntax tree (``ast``; the
file is never imported or run): every function decorated ``@nox.session`` (or
``@session``), named by the decorator's ``name=`` when it gives one.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from vera.harvest.facts import BUILD, Document, Fact

PREDICATES = frozenset({"defines_session"})


def wants(path: str) -> bool:
    return path.rsplit("/", 1)[-1] == "noxfile.py"


def _is_session(decorator: ast.expr) -> str | None:
    """The session name a decorator gives ("" for the function's), None if no session."""
    call = decorator if isinstance(decorator, ast.Call) else None
    target = call.func if call else decorator
    named = (isinstance(target, ast.Attribute) and target.attr == "session"
             and isinstance(target.value, ast.Name) and target.value.id == "nox") or (
        isinstance(target, ast.Name) and target.id == "session")
    if not named:
        return None
    for keyword in call.keywords if call else []:
        if keyword.arg == "name" and isinstance(keyword.value, ast.Constant) \
                and isinstance(keyword.value.value, str):
            return keyword.value.value
    return ""


def extract(doc: Document) -> Iterator[Fact]:
    try:
        tree = ast.parse(doc.text)
    except (SyntaxError, ValueError, RecursionError):
        return
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        for decorator in node.decorator_list:
            name = _is_session(decorator)
            if name is None:
                continue
            yield doc.fact(doc.subject_for_file(), "defines_session", f"nox -s {name or node.name}",
                           decorator.lineno, node.lineno, slot=name or node.name,
                           document_type=BUILD, quote=name or node.name)
            break
