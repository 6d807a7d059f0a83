"""What this user approved when they connected a runtime in a repository: the two endpoints,
the reviewed overrides and the kind of credential, kept untracked in the user's own state
folder, one file per repository checkout.

The tracked ``.vera/integrations.json`` is anyone's to commit, so it cannot vouch for
itself: ``vera doctor`` compares the project with what the installed VERA renders for these
approvals, and reports where the tracked record disagrees with them.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import platformdirs

FOLDER = "connections"


@dataclass(frozen=True)
class Approval:
    api_url: str
    mcp_url: str
    overrides: dict[str, str]
    credential: str  # the record's label: "none", "runtime-oauth" or "file:<path>"

    @property
    def authenticated(self) -> bool:
        """Whether the runtime's server definition carries the static token."""
        return self.credential.startswith("file:")


def state_file(root: Path) -> Path:
    """This checkout's approvals; worktrees of one repository are connected one by one."""
    key = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:32]
    return Path(platformdirs.user_state_dir("vera")) / FOLDER / f"{key}.json"


def _read(root: Path) -> dict[str, Any]:
    path = state_file(root)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("repository") != str(root.resolve()):
        return {}
    runtimes = data.get("runtimes")
    return runtimes if isinstance(runtimes, dict) else {}


def load(root: Path) -> dict[str, Approval]:
    approved: dict[str, Approval] = {}
    for name, item in _read(root).items():
        try:
            approved[name] = Approval(str(item["api_url"]), str(item["mcp_url"]),
                                      {str(k): str(v) for k, v in item["overrides"].items()},
                                      str(item["credential"]))
        except (KeyError, TypeError, AttributeError):
            continue  # an unreadable entry is no approval: doctor asks for a connect
    return approved


def _write(root: Path, runtimes: dict[str, Any]) -> None:
    path = state_file(root)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not runtimes:
        path.unlink(missing_ok=True)
        return
    text = json.dumps({"repository": str(root.resolve()), "runtimes": runtimes}, indent=2,
                      sort_keys=True) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)


def save(root: Path, runtime: str, approval: Approval) -> None:
    runtimes = _read(root)
    runtimes[runtime] = asdict(approval)
    _write(root, runtimes)


def forget(root: Path, runtime: str) -> None:
    runtimes = _read(root)
    if runtimes.pop(runtime, None) is not None:
        _write(root, runtimes)
