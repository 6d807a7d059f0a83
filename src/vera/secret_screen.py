"""Server-side secret screening of agent-written text.

A proposal whose subject, predicate, object or evidence carries a credential is refused
before anything is stored: the caller's instructions alone never enforce this (GUIDE,
System Prompt and Instruction Policy). The detectors aim at credentials with a
recognizable shape (provider prefixes, PEM armour, JWTs, URLs with passwords) and at
``key = value`` assignments whose value looks random, so ordinary prose that merely
mentions "token" or "password" passes.

Every pattern runs in time linear in the text: a match may start only where the run of
its leading characters starts (a look-behind), and a run that can never be followed by
what comes next is taken whole (possessive quantifiers), so no start rescans the text
after it. ``bench/secret_screen.py`` times the worst shapes found. Still, the screen is
CPU work of milliseconds on the largest proposal: async callers run it in a worker thread
(``screen_off_loop``).

Pure code: no I/O. The refusal names the field and the kind of credential, never the
matched text. One home for the rule: the knowledge service screens proposals and their
task identity with it, and the gateway the free text a legacy tool would store.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

from vera.errors import InvalidInput

# Assignment values shorter than this, or less random than this, are not treated as secrets
# ("password = hunter2" is a bad idea, but "timeout_secret = 30" is not a credential).
MIN_ASSIGNED_SECRET_LENGTH = 12
MIN_ASSIGNED_SECRET_ENTROPY = 3.0  # bits per character (Shannon, over the value itself)
MIN_BEARER_LENGTH = 16


@dataclass(frozen=True)
class _Detector:
    kind: str
    pattern: re.Pattern[str]
    # Group whose text must also look random; None when the shape alone is conclusive.
    entropy_group: str | None = None
    # Group whose text must name a secret (``_SECRET_NAME``); None when it need not.
    name_group: str | None = None


def _p(regex: str, flags: int = 0) -> re.Pattern[str]:
    return re.compile(regex, flags)


_SECRET_WORDS = (
    r"api[_-]?key|apikey|access[_-]?key(?:[_-]?id)?|secret(?:[_-]?access)?(?:[_-]?key)?"
    r"|client[_-]?secret|auth[_-]?token|access[_-]?token|refresh[_-]?token|token"
    r"|passw(?:or)?d|pwd|private[_-]?key|credentials?"
)

_DETECTORS: tuple[_Detector, ...] = (
    _Detector(
        "private_key",
        _p(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"),
    ),
    _Detector("aws_access_key", _p(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[A-Z0-9]{16}\b")),
    _Detector("github_token", _p(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})")),
    _Detector("gitlab_token", _p(r"\bglpat-[A-Za-z0-9_\-]{20,}")),
    _Detector("slack_token", _p(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    _Detector(
        "slack_webhook",
        _p(r"https://hooks\.slack\.com/services/T[A-Za-z0-9]+/B[A-Za-z0-9]+/[A-Za-z0-9]+"),
    ),
    _Detector("stripe_key", _p(r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}")),
    _Detector("openai_key", _p(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_\-]{20,}")),
    _Detector("google_api_key", _p(r"\bAIza[0-9A-Za-z_\-]{35}")),
    _Detector("npm_token", _p(r"\bnpm_[A-Za-z0-9]{36}\b")),
    _Detector(
        "jwt",
        _p(r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}+\.eyJ[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{8,}"),
    ),
    _Detector(
        # scheme://user:password@host — any scheme (postgres, mysql, redis, amqp, https...).
        "connection_string",
        _p(
            r"(?<![a-z0-9+.\-])[a-z][a-z0-9+.\-]*+://[^\s:/@]*+:(?P<pw>[^\s@/]++)@[^\s/@]+",
            re.IGNORECASE,
        ),
    ),
    _Detector(
        "connection_string",
        # Key-value connection strings: "Password=...;" (ADO.NET, JDBC properties, libpq).
        _p(r"(?:^|[;\s])(?:password|pwd)\s*=\s*(?P<pw>[^;\s'\"]{6,})", re.IGNORECASE),
    ),
    _Detector(
        "bearer_token",
        _p(
            rf"\b(?:bearer|token)\s+(?P<value>[A-Za-z0-9\-._~+/]{{{MIN_BEARER_LENGTH},}}=*)",
            re.IGNORECASE,
        ),
        entropy_group="value",
    ),
    _Detector(
        "basic_auth",
        _p(r"\bauthorization\s*:\s*basic\s+(?P<value>[A-Za-z0-9+/]{12,}=*)", re.IGNORECASE),
    ),
    _Detector(
        "assigned_secret",
        # api_key=..., "client_secret": "...", export GITHUB_TOKEN=..., password: ...
        # The whole name is taken at once; whether it names a secret is asked of it after.
        _p(
            r"(?<![A-Za-z0-9_])(?P<name>[A-Za-z0-9_]++)[\"']?\s*+"
            rf"(?::=|=>|=|:)\s*+[\"']?(?P<value>[^\s\"',;]{{{MIN_ASSIGNED_SECRET_LENGTH},}})",
        ),
        entropy_group="value",
        name_group="name",
    ),
)

_SECRET_NAME = _p(_SECRET_WORDS, re.IGNORECASE)

# Values that are placeholders, not secrets.
_PLACEHOLDER = re.compile(
    r"^(?:<[^>]*>|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|\{\{.*\}\}|%\(?[A-Za-z_]+\)?s?|x+|\*+|\.+"
    r"|(?:your|my|the|example|placeholder|changeme|redacted|dummy)[A-Za-z0-9_\-]*)$",
    re.IGNORECASE,
)


def shannon_entropy(text: str) -> float:
    """Bits per character of ``text``'s own character distribution."""
    if not text:
        return 0.0
    counts: dict[str, int] = {}
    for ch in text:
        counts[ch] = counts.get(ch, 0) + 1
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def _looks_random(value: str) -> bool:
    if _PLACEHOLDER.match(value):
        return False
    if len(value) < MIN_ASSIGNED_SECRET_LENGTH:
        return False
    classes = sum(
        bool(re.search(p, value)) for p in (r"[a-z]", r"[A-Z]", r"[0-9]", r"[^A-Za-z0-9]")
    )
    # Words joined by separators (snake_case identifiers, file names) are not keys.
    if re.fullmatch(r"[a-z]+(?:[_\-.][a-z]+)*", value):
        return False
    return classes >= 2 and shannon_entropy(value) >= MIN_ASSIGNED_SECRET_ENTROPY


def _is_placeholder_password(value: str) -> bool:
    return bool(_PLACEHOLDER.match(value)) or value.startswith(("$", "%", "{"))


def find_secret(text: str) -> str | None:
    """The kind of the first credential found in ``text``, or None."""
    if not text:
        return None
    for detector in _DETECTORS:
        for match in detector.pattern.finditer(text):
            groups = match.groupdict()
            if "pw" in groups and groups["pw"] is not None:
                if _is_placeholder_password(groups["pw"]):
                    continue
                return detector.kind
            if detector.name_group is not None:
                if not _SECRET_NAME.search(match.group(detector.name_group)):
                    continue
            if detector.entropy_group is not None:
                if not _looks_random(match.group(detector.entropy_group)):
                    continue
            return detector.kind
    return None


async def screen_off_loop(fields: Iterable[tuple[str, str]]) -> None:
    """``screen``, in a worker thread: the serving event loop never runs the patterns."""
    await asyncio.to_thread(screen, list(fields))


def screen(fields: Iterable[tuple[str, str]]) -> None:
    """Raises ``invalid_input`` naming the first field that carries a credential.

    The error names the field and the credential kind only; the matched text is never
    echoed back, logged or stored.
    """
    for name, value in fields:
        kind = find_secret(value)
        if kind is not None:
            raise InvalidInput(
                name,
                "looks like a credential; secrets are never stored",
                reason="secret",
                secret_kind=kind,
            )
