"""Every `vera` command line the README and the deployment guide show parses as the CLI
reads it (issue 41: README's `vera curate ... --api-url` lines did not). The lines are
extracted from the documents' shell blocks, placeholders filled in; the team loop
(tests/e2e/test_team_loop.py) and the backup test run the same lines against a stack."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from vera.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = ("README.md", "docs/deploy.md", "docs/install.md", "docs/curation.md")
# What the documents write for a value the reader fills in.
PLACEHOLDERS = {"fk_…": "fk_0123", "vera_…": "vera_0123", "…": "x", "$API": "https://h/api"}
COMMAND = re.compile(r"^(?:[A-Z_]+=\S+\s+)*(?:\.venv/bin/)?vera\s")


def command_lines() -> list[tuple[str, str]]:
    lines = []
    for name in DOCUMENTS:
        in_shell = False
        for line in (ROOT / name).read_text().splitlines():
            if line.startswith("```"):
                in_shell = line.strip() in ("```bash", "```sh", "```shell")
                continue
            text = line.split("  #")[0].split(" # ")[0].strip()
            if in_shell and COMMAND.match(text):
                lines.append((name, text))
    return lines


def argv(line: str) -> list[str]:
    line = re.sub(r"\s\[[^\]]*\]", "", line)  # optional parts, as usage writes them
    line = re.sub(r"\$\([^)]*\)", "x", line)  # $(date +%F)
    for placeholder, value in PLACEHOLDERS.items():
        line = line.replace(placeholder, value)
    words = shlex.split(line)
    while "=" in words[0]:
        words.pop(0)  # VERA_API_KEY=... before the command
    return words[1:]


def test_the_documents_show_command_lines() -> None:
    assert len(command_lines()) >= 10


@pytest.mark.parametrize(("document", "line"), command_lines())
def test_each_documented_command_line_parses(document: str, line: str) -> None:
    try:
        build_parser().parse_args(argv(line))
    except SystemExit as exit_:
        pytest.fail(f"{document}: `{line}` does not parse (exit {exit_.code})")
