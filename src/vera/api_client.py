"""How a `vera` command reaches the REST API as a person: one home for finding the API,
the API key and the refusals, shared by `vera curate` and `vera ingest`.

- The API is ``--api-url``, else the running stack's ``api_url`` in
  ``<data-dir>/run/stack.json``. With neither, the command stops: guessing a port would
  talk to whatever listens there (another team's stack).
- The API key is read from standard input with ``--api-key-stdin``, else from
  ``VERA_API_KEY``; when the API answers 401 and a terminal is attached, it is asked for
  once. Never from a flag: a command line shows in ``ps``. Without one, the API of the
  stack running on the data dir (and only that address) gets the data dir's secret
  (``vera.local_secret``), which its local-dev profile asks for.
- A key is never sent over plain ``http://`` to a host other than this machine's loopback,
  unless ``--allow-plain-http`` says so on purpose.
- When the API asks the caller to come back later (429 or 503 with ``Retry-After``: the
  request was not served), the command waits as asked and sends it again, up to
  ``RETRY_BUDGET_SECONDS`` of waiting in all; a command that polls paces itself with
  ``poll_delays``. A bulk load then finishes within the API's per-key budget instead of
  stopping with ``quota_exceeded``.
"""

from __future__ import annotations

import argparse
import getpass
import ipaddress
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from vera.config import Settings
from vera.local_secret import read_secret

TIMEOUT_SECONDS = 60.0
# Exit codes every API command shares: done, the API could not be reached, refused.
EXIT_OK, EXIT_UNREACHABLE, EXIT_REFUSED = 0, 1, 2
# Answers that mean "not served, come back after Retry-After": the rate limits
# (api.rate_limits) and a draining replica (vera.entrypoints.draining).
RETRIED_STATUSES = (429, 503)
# Waiting the API asked for, in all, before a command gives up and reports the refusal;
# while the API says it is unavailable (503), this long in a row.
RETRY_BUDGET_SECONDS = 900.0
UNAVAILABLE_BUDGET_SECONDS = 120.0
# One wait at most, whatever a proxy in front of the API says.
RETRY_AFTER_CAP_SECONDS = 120.0
# Waits of a polling loop: quick at first, then no more often than the API's per-key
# budget (300 a minute by default) can take beside the work itself.
POLL_FIRST_SECONDS, POLL_MOST_SECONDS = 0.25, 2.0


def poll_delays(first: float = POLL_FIRST_SECONDS, most: float = POLL_MOST_SECONDS
                ) -> Iterator[float]:
    """The waits between a command's polls: doubling from ``first`` up to ``most``."""
    delay = first
    while True:
        yield delay
        delay = min(delay * 2, most)


def retry_after(response: httpx.Response) -> float | None:
    """Seconds the API asked the caller to wait before sending the request again (RFC 9110
    ``Retry-After``: seconds or a date), capped; None when it did not ask."""
    if response.status_code not in RETRIED_STATUSES:
        return None
    value = response.headers.get("retry-after", "").strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = (parsedate_to_datetime(value) - datetime.now(UTC)).total_seconds()
        except (TypeError, ValueError):
            return None
    return min(max(seconds, 0.0), RETRY_AFTER_CAP_SECONDS)


class ClientStop(Exception):
    """The command cannot go on; ``message`` says why and ``exit_code`` how it ends."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


# What a person does about a refusal whose code alone does not say it.
NEXT_STEP = {
    "project_out_of_scope": "no project you can read has that slug or id; in local mode the "
    "first `vera ingest` or `vera harvest --publish` creates it, on a team a workspace owner "
    "attaches it: README, Set up a team",
}


class ApiRefused(Exception):
    """The API answered an error: its status and the body's ``error`` object."""

    def __init__(self, status: int, error: dict[str, Any]) -> None:
        super().__init__(str(error.get("code", status)))
        self.status = status
        self.error = error

    @property
    def code(self) -> str:
        return str(self.error.get("code", self.status))

    def describe(self) -> str:
        """The stable code and its details (field, reason...), never a credential."""
        detail = ", ".join(f"{k}={v}" for k, v in self.error.items()
                           if k not in ("code", "message"))
        step = NEXT_STEP.get(self.code)
        return (f"refused ({self.code})" + (f": {detail}" if detail else "")
                + (f" ({step})" if step else ""))


def add_connection_arguments(parser: argparse.ArgumentParser, *, repeated: bool = False
                             ) -> None:
    """The options that find the API and the key. ``repeated``: a subcommand's copy of its
    parent's, so they may follow the subcommand as well as precede it (a value given
    there wins; none given leaves the parent's)."""
    keep: dict[str, Any] = {"default": argparse.SUPPRESS} if repeated else {}
    parser.add_argument("--api-url", help="REST API base URL (default: the running stack's "
                        "api_url in <data-dir>/run/stack.json)", **keep)
    parser.add_argument("--api-key-stdin", action="store_true",
                        help="read the API key from standard input (default: VERA_API_KEY, "
                             "else a prompt when the API asks for one; none in local-dev)",
                        **keep)
    parser.add_argument("--allow-plain-http", action="store_true",
                        help="send the API key over http:// to a non-loopback host", **keep)
    parser.add_argument("--data-dir", type=Path, help="data dir of the running stack", **keep)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def in_clear(url: str) -> bool:
    """Whether a credential sent to ``url`` would cross a network unencrypted: plain
    ``http://`` to a host other than this machine's loopback."""
    parts = urlsplit(url)
    return parts.scheme != "https" and not _loopback(parts.hostname or "")


def _running_stack(settings: Settings, data_dir: Path | None) -> dict | None:
    """stack.json of the stack running on the data dir, if one runs there."""
    from vera.stack.run_files import read_stack_file

    return read_stack_file((data_dir or settings.data_dir).expanduser().resolve())


def _stack_api_url(settings: Settings, data_dir: Path | None) -> str | None:
    """The REST API of the stack running on the data dir, if one runs there."""
    stack = _running_stack(settings, data_dir)
    if stack is not None and stack.get("api_url"):
        return str(stack["api_url"]).rstrip("/")
    return None


def api_url(settings: Settings, explicit: str | None, data_dir: Path | None) -> str:
    if explicit:
        return explicit.rstrip("/")
    if (running := _stack_api_url(settings, data_dir)) is not None:
        return running
    where = (data_dir or settings.data_dir).expanduser().resolve()
    raise ClientStop(
        f"no running VERA stack in {where} (no run/stack.json) and no --api-url: start "
        "one with `vera up`, pass its --data-dir, or give the deployment's --api-url",
        EXIT_UNREACHABLE)


@dataclass
class ApiClient:
    """A person's session with the REST API."""

    base_url: str
    api_key: str = ""
    allow_plain_http: bool = False
    transport: Any = None
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)
    _client: httpx.Client | None = field(default=None, repr=False)
    _waited: float = field(default=0.0, repr=False)
    _unavailable: float = field(default=0.0, repr=False)

    def __enter__(self) -> ApiClient:
        self._client = httpx.Client(base_url=self.base_url, timeout=TIMEOUT_SECONDS,
                                    transport=self.transport)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._client is not None:
            self._client.close()

    def _headers(self) -> dict[str, str]:
        if not self.api_key:
            return {}
        url = urlsplit(self.base_url)
        if in_clear(self.base_url) and not self.allow_plain_http:
            raise ClientStop(
                f"refusing to send an API key over plain {url.scheme}:// to {url.hostname}: "
                "use https, or --allow-plain-http if this network is trusted", EXIT_REFUSED)
        return {"Authorization": f"Bearer {self.api_key}"}

    def call(self, method: str, path: str, *, json: Any = None,
             params: dict[str, Any] | None = None) -> dict[str, Any]:
        """The answer's JSON; raises ApiRefused for an error answer, ClientStop when the
        API cannot be reached. A 401 with a terminal attached asks for the key once; an
        answer asking to come back later is sent again after the wait it names."""
        assert self._client is not None, "use ApiClient as a context manager"
        prompted = False
        while True:
            try:
                response = self._client.request(method, path, json=json, params=params,
                                                headers=self._headers())
            except httpx.HTTPError as exc:
                raise ClientStop(
                    f"cannot reach the REST API at {self.base_url} ({type(exc).__name__}); "
                    "is the stack running?", EXIT_UNREACHABLE) from None
            if response.status_code == 401 and not prompted and _can_prompt():
                prompted = True
                self.api_key = getpass.getpass(f"API key for {self.base_url}: ").strip()
                continue
            wait = retry_after(response)
            unavailable = response.status_code == 503
            if wait is None or self._waited + wait > RETRY_BUDGET_SECONDS or (
                    unavailable and self._unavailable + wait > UNAVAILABLE_BUDGET_SECONDS):
                break
            self._unavailable = self._unavailable + wait if unavailable else 0.0
            if wait >= 5:
                print(f"vera: the API asked to wait {wait:.0f} s "
                      f"(HTTP {response.status_code}); waiting", file=sys.stderr)
            self._waited += wait
            self.sleep(wait)
        if response.status_code != 503:
            self._unavailable = 0.0
        data = response.json() if response.content else {}
        if response.status_code >= 400:
            error = data.get("error") if isinstance(data, dict) else None
            raise ApiRefused(response.status_code, error if isinstance(error, dict) else {})
        return data if isinstance(data, dict) else {}


def _can_prompt() -> bool:
    return sys.stdin.isatty() and sys.stderr.isatty()


def open_client(args: argparse.Namespace, settings: Settings, transport: Any = None
                ) -> ApiClient:
    """The client the command's arguments describe (see the module docstring)."""
    base = api_url(settings, args.api_url, args.data_dir)
    if args.api_key_stdin:
        key = sys.stdin.readline().strip()
        if not key:
            raise ClientStop("--api-key-stdin: standard input held no API key", EXIT_REFUSED)
    else:
        key = os.environ.get("VERA_API_KEY", "").strip()
    own_stack = base == _stack_api_url(settings, args.data_dir)
    # A local-mode stack's API takes its data dir's secret and nothing else: an API key
    # exported for a team deployment must not shadow it.
    local_mode = own_stack and (_running_stack(settings, args.data_dir) or {}).get(
        "auth_profile") == "local-dev"
    if own_stack and (local_mode or not key):
        # The local stack of this data dir: its secret (vera.local_secret), sent to no
        # other address, so a listener someone else put on another port never sees it.
        key = read_secret((args.data_dir or settings.data_dir).expanduser()) or ""
    return ApiClient(base, key, args.allow_plain_http, transport)
