"""What `vera up` prints when ready tells a local user the one connect command that works
for this stack: its URLs and data dir, which connect does not find by itself."""

from __future__ import annotations

import shlex
from pathlib import Path

from vera.cli import build_parser
from vera.config import Settings
from vera.stack.supervisor import banner

API = "http://127.0.0.1:18081"
MCP = "http://127.0.0.1:18080/mcp"


def test_the_local_banner_names_a_connect_command_for_this_stack(tmp_path: Path) -> None:
    data_dir = tmp_path / "a data dir"
    said = banner(Settings(environment="local"), data_dir, 18080, MCP, API, f"{API}/console/")
    [line] = [line for line in said.splitlines() if line.strip().startswith("vera connect ")]
    argv = shlex.split(line.replace("<runtime>", "codex"))[1:]
    args = build_parser().parse_args(argv)
    assert (args.command, args.runtime) == ("connect", "codex")
    assert (args.api_url, args.mcp_url, Path(args.data_dir)) == (API, MCP, data_dir)
