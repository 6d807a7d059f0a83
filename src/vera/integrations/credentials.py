"""The MCP token a connected runtime sends, kept valid without the developer noticing.

``vera connect`` stores what minting a token again takes (:class:`Minter`) in the user's
own state folder, owner-only (file 0600, folder 0700), outside the repository, bound to the
REST API it was issued by:

- a team deployment: a per-connection API key that connect created for this checkout with
  the key the user typed (``POST /identity/api-keys``), so the user's own key is never kept
  and revoking the connection's key ends this checkout's tokens alone;
- a local stack: nothing secret; the data dir, whose secret (``vera.local_secret``) is
  already on disk and goes only to the API of the stack running on that data dir.

:func:`current_token` (``vera mcp-token``, which the runtimes run as their headers helper)
answers the repository's untracked token while it has more than a margin left, without
touching the network, and otherwise mints a new one with the stored key, sent only to the
API URL it was stored for, and replaces the token files in one rename each.

Each connected runtime has its own: its token files (``.vera/<runtime>/``), its stored
minter and its per-connection key, scoped to its own save mode. ``runtime=None`` is the
shared layout every runtime of a checkout used before, still answered for the runtimes
not yet connected again (``vera connect`` migrates them).
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx
import jwt
import platformdirs

from vera.api_client import in_clear
from vera.integrations import workspace
from vera.integrations.ownership import credential_files
from vera.local_secret import read_secret
from vera.stack.run_files import read_stack_file

FOLDER = "credentials"
TIMEOUT_SECONDS = 5.0
# A token ending sooner than this is minted again (a quarter of its life when that is
# shorter), so a session never starts with one about to end.
REFRESH_MARGIN_SECONDS = 300.0


class NotMinted(Exception):
    """No valid token could be had; ``reason`` is a stable code: ``not_connected``,
    ``unreachable``, ``refused``, ``stack_moved``, ``plain_http``, ``tracked``."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class Minter:
    """What mints this checkout's MCP token again: ``api_key`` (team) or ``data_dir``
    (local), used only with ``api_url``."""

    api_url: str
    mcp_url: str
    scopes: tuple[str, ...]
    api_key: str | None = None
    key_id: str | None = None
    data_dir: str | None = None
    allow_plain_http: bool = False

    @property
    def local(self) -> bool:
        return self.data_dir is not None


def store_folder() -> Path:
    # Found from HOME alone on Linux: Codex runs its headers helper with HOME and PATH but
    # without XDG_* variables, and it must find what connect stored.
    if sys.platform.startswith("linux"):
        return Path.home() / ".local" / "state" / "vera" / FOLDER
    return Path(platformdirs.user_state_dir("vera")) / FOLDER


def headers_command(runtime: str) -> str:
    """What ``runtime`` runs for its Authorization header (Claude Code's ``headersHelper``,
    Codex's ``http_headers_helper``), from inside the repository: the installed ``vera`` on
    PATH, never a path into the checkout."""
    return f"vera mcp-token --runtime {runtime} --headers"


def store_file(root: Path, runtime: str | None) -> Path:
    key = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:32]
    return store_folder() / (f"{key}.json" if runtime is None else f"{key}.{runtime}.json")


def _write_atomic(path: Path, text: str) -> None:
    """Owner-only, in one rename: a reader sees the old file or the new one."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def store(root: Path, runtime: str, minter: Minter) -> None:
    path = store_file(root, runtime)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    data = {"repository": str(root.resolve()), **asdict(minter)}
    _write_atomic(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def load(root: Path, runtime: str | None) -> Minter | None:
    try:
        data = json.loads(store_file(root, runtime).read_text())
        if data.pop("repository") != str(root.resolve()):
            return None
        return Minter(**{**data, "scopes": tuple(data["scopes"])})
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def forget(root: Path, runtime: str | None) -> Minter | None:
    """Drops the stored minter; returns it (its per-connection key is for the caller to
    revoke)."""
    minter = load(root, runtime)
    store_file(root, runtime).unlink(missing_ok=True)
    return minter


def _post(url: str, bearer: str, body: dict, allow_plain_http: bool) -> dict:
    if in_clear(url) and not allow_plain_http:
        raise NotMinted("plain_http", f"{url} is plain http:// to a host other than this "
                        "machine; run `vera connect` again")
    try:
        answer = httpx.post(url, json=body, headers={"Authorization": f"Bearer {bearer}"},
                            timeout=TIMEOUT_SECONDS, follow_redirects=False)
    except httpx.HTTPError as exc:
        raise NotMinted("unreachable", f"cannot reach {url} ({type(exc).__name__}); is "
                        "VERA running?") from None
    if answer.status_code not in (200, 201):
        raise NotMinted("refused", f"{url} answered HTTP {answer.status_code}; run `vera "
                        "connect` again")
    try:
        data = answer.json()
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise NotMinted("refused", f"{url} answered no JSON object")
    return data


def local_bearer(data_dir: Path, api_url: str) -> str | None:
    """The data dir's secret, when ``api_url`` is the API of the local-dev stack running on
    that data dir (and only then: a listener on another address never sees it)."""
    stack = read_stack_file(data_dir.expanduser().resolve()) or {}
    if stack.get("auth_profile") != "local-dev" or str(
            stack.get("api_url") or "").rstrip("/") != api_url.rstrip("/"):
        return None
    return read_secret(data_dir)


def _bearer(minter: Minter) -> str:
    if minter.api_key is not None:
        return minter.api_key
    secret = local_bearer(Path(minter.data_dir or ""), minter.api_url)
    if secret is None:
        raise NotMinted("stack_moved", f"no local VERA stack answers at {minter.api_url} "
                        "for its data dir; start it with `vera up` (or run `vera connect` "
                        "again)")
    return secret


def mint(minter: Minter) -> str:
    """A new MCP token from the stored key, asked of the API URL it was stored for."""
    data = _post(f"{minter.api_url}/identity/mcp-token", _bearer(minter),
                 {"scopes": list(minter.scopes)}, minter.allow_plain_http)
    token = data.get("token") or data.get("access_token")
    if not isinstance(token, str) or not token:
        raise NotMinted("refused", "the API answered no token")
    return token


def create_connection_key(api_url: str, user_key: str, label: str,
                          allow_plain_http: bool) -> tuple[str, str]:
    """(api_key, key_id): a key for this connection alone, made with the user's key."""
    data = _post(f"{api_url}/identity/api-keys", user_key, {"label": label}, allow_plain_http)
    key, key_id = data.get("api_key"), data.get("key_id")
    if not isinstance(key, str) or not isinstance(key_id, str):
        raise NotMinted("refused", "the API answered no API key")
    return key, key_id


def revoke_connection_key(minter: Minter) -> bool:
    """Best effort: the per-connection key revokes itself; False when that failed."""
    if minter.api_key is None or minter.key_id is None:
        return True
    if in_clear(minter.api_url) and not minter.allow_plain_http:
        return False
    try:
        answer = httpx.delete(f"{minter.api_url}/identity/api-keys/{minter.key_id}",
                              headers={"Authorization": f"Bearer {minter.api_key}"},
                              timeout=TIMEOUT_SECONDS, follow_redirects=False)
    except httpx.HTTPError:
        return False
    return answer.status_code == 200


def write_token(root: Path, runtime: str | None, token: str, mcp_url: str) -> None:
    """The token files the runtime reads, each replaced in one rename, owner-only."""
    files = credential_files(runtime)
    for folder in {root / ".vera", (root / files.token).parent}:
        if folder.is_symlink() or not folder.is_dir():
            raise NotMinted("not_connected", f"{folder} is not a folder; run `vera connect`")
    tracked = workspace.tracked(root, list(files.paths))
    if tracked:
        raise NotMinted("tracked", f"{', '.join(tracked)} is tracked by Git; untrack it "
                        "(git rm --cached) and run `vera connect` again")
    for rel, text in ((files.token, token),
                      (files.headers, json.dumps(headers(token)) + "\n"),
                      (files.minted_for, mcp_url + "\n")):
        _write_atomic(root / rel, text)


def headers(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def seconds_left(token: str, now: float | None = None) -> tuple[float, float]:
    """(seconds until the token ends, its margin); a token without ``exp`` has ended."""
    try:
        claims = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError:
        return 0.0, 0.0
    expiry, issued = claims.get("exp"), claims.get("iat")
    if not isinstance(expiry, (int, float)):
        return 0.0, 0.0
    life = expiry - issued if isinstance(issued, (int, float)) else REFRESH_MARGIN_SECONDS
    left = expiry - (time.time() if now is None else now)
    return left, min(REFRESH_MARGIN_SECONDS, life / 4)


def _cached(root: Path, runtime: str | None) -> str | None:
    path = root / credential_files(runtime).token
    if path.is_symlink() or not path.is_file():
        return None
    return path.read_text().strip() or None


def current_token(root: Path, runtime: str | None) -> str:
    """``runtime``'s token with more than its margin left: the cached one, else one minted
    now (a still-valid cached token when minting fails); :class:`NotMinted` otherwise."""
    cached = _cached(root, runtime)
    left, margin = seconds_left(cached) if cached else (0.0, 0.0)
    if cached and left > margin:
        return cached
    minter = load(root, runtime)
    if minter is None:
        if cached and left > 0:
            return cached
        raise NotMinted("not_connected", f"no stored credential for {root}; run `vera "
                        "connect <runtime>` there")
    try:
        token = mint(minter)
    except NotMinted:
        if cached and left > 0:
            return cached
        raise
    write_token(root, runtime, token, minter.mcp_url)
    return token
