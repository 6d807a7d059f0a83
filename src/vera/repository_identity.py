"""Canonical repository identity (GUIDE §Repository Identity and Project Resolution).

A Git remote becomes ``host/path``: credentials, query, fragment, a trailing ``.git`` and
trailing slashes are removed, the host is lowercased and loses its port, and the path keeps
its case (``https://tok@GitHub.com/Acme/Payments.git`` ->
``github.com/Acme/Payments``). Anything that does not name a remote host (a local path,
``file://``, an unknown scheme, garbage) is unsupported and yields ``None``, so nothing
local ever becomes an identity.

Accepted forms: ``https://``, ``http://``, ``ssh://``, ``git://``, ``git+ssh://``
(``ssh+git://``, ``git+https://``), the scp form ``[user@]host:owner/repo(.git)``, and an
already canonical ``host/owner/repo`` whose host looks like a domain, so that
``canonicalize`` is idempotent.

Every port is dropped, not only the scheme's default: one repository reached over
``ssh://host:2222`` and ``https://host`` must be one identity, and ``host:2222/x`` would
otherwise be ambiguous with the scp form (git reads it as host ``host``, path ``2222/x``).

``relative_code_path`` is the same rule for a code-path hint: repository-relative, or
nothing (a local absolute path never leaves the caller's request).
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

__all__ = ["canonicalize", "relative_code_path"]

MAX_LENGTH = 2048

_SCHEMES = frozenset({"https", "git+https", "http", "ssh", "git+ssh", "ssh+git", "git"})

# A DNS name label by label; the whole host is lowercased before it is matched.
_LABEL = r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?"
_HOSTNAME = re.compile(rf"^(?=.{{1,253}}$){_LABEL}(?:\.{_LABEL})*$")
# scp-like syntax as git reads it: no slash before the first colon, and not "//" after it.
_SCP = re.compile(r"^(?:(?P<user>[^@/]+)@)?(?P<host>\[[^\]/]+\]|[^@:/\[\]]+):(?!//)(?P<path>.+)$")
_SCHEME = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://")
# Characters never valid in an identity (whitespace, controls, backslashes).
_FORBIDDEN = re.compile(r"[\s\x00-\x1f\x7f\\]")


def canonicalize(remote: str) -> str | None:
    """Returns the canonical ``host/path`` identity of a Git remote, or None when unsupported."""
    if not isinstance(remote, str):
        return None
    text = remote.strip()
    if not text or len(text) > MAX_LENGTH or _FORBIDDEN.search(text):
        return None

    scheme_match = _SCHEME.match(text)
    if scheme_match:
        return _from_url(text, scheme_match.group("scheme").lower())
    scp = _SCP.match(text)
    if scp:
        host = scp.group("host")
        # "C:/work/repo" is a Windows drive, not a host called "c".
        if len(host) == 1:
            return None
        return _join(_host(host.strip("[]")), _strip_query(scp.group("path")))
    return _from_canonical(text)


def _from_url(text: str, scheme: str) -> str | None:
    if scheme not in _SCHEMES:
        return None  # file://, unknown schemes
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - validates the port; a malformed one is garbage
    except ValueError:
        return None
    if not parts.hostname:
        return None
    return _join(_host(parts.hostname), parts.path)


def _from_canonical(text: str) -> str | None:
    """``host/owner/repo`` without a scheme: only when the host is unmistakably a domain."""
    if text.startswith(("/", ".", "~")) or "@" in text:
        return None
    host, sep, path = text.partition("/")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]  # an IPv6 literal, as canonicalize writes it
    elif "." not in host and host.lower() != "localhost":
        return None
    return _join(_host(host), _strip_query(path)) if sep else None


def _host(raw: str) -> str | None:
    host = raw.strip().lower().rstrip(".")
    if not host:
        return None
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host if _HOSTNAME.match(host) else None
    return f"[{address.compressed}]" if address.version == 6 else address.compressed


def _strip_query(path: str) -> str:
    return path.split("#", 1)[0].split("?", 1)[0]


def _join(host: str | None, path: str) -> str | None:
    if host is None:
        return None
    segments = [segment for segment in path.split("/") if segment]
    if segments and segments[-1].lower().endswith(".git"):
        segments[-1] = segments[-1][: -len(".git")]
    if not segments or any(segment in ("", ".", "..") for segment in segments):
        return None
    return f"{host}/{'/'.join(segments)}"


# "scheme:" at the start: a URL, or a Windows drive ("C:").
_SCHEME_OR_DRIVE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def relative_code_path(path: str) -> str | None:
    """A code path as a repository-relative ``a/b/c``, or None when it is not one.

    Separators become ``/``, and ``.`` segments and doubled slashes go. An absolute or
    home-relative path (``/home/alice/...``, ``~/src``, ``C:\\work``, ``\\\\host\\share``),
    a URL, or one that climbs out with ``..`` names the caller's machine, not the
    repository, so it yields None and is never sent on or stored.
    """
    if not isinstance(path, str):
        return None
    text = path.strip().replace("\\", "/")
    if not text or _CONTROL.search(text) or len(text) > MAX_LENGTH:
        return None
    if text.startswith(("/", "~")) or _SCHEME_OR_DRIVE.match(text):
        return None
    segments = [segment for segment in text.split("/") if segment not in ("", ".")]
    if not segments or ".." in segments:
        return None
    return "/".join(segments)
