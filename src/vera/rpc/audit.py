"""ListAuditRecords, the same in every service that keeps an audit chain (identity,
knowledge, snapshot): a page of ``vera.db.audit.AuditTrail`` as the service's messages."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any, Protocol

from vera.errors import InvalidInput, Unavailable
from vera.request_fields import page_size
from vera.rpc.timestamps import to_timestamp

DEFAULT_PAGE = 100
MAX_PAGE = 500
MAX_ACTION = 64


class HeadLike(Protocol):
    @property
    def count(self) -> int: ...
    @property
    def hash(self) -> str: ...


class AuditPages(Protocol):
    async def page(
        self, after: int, limit: int, action: str
    ) -> tuple[Sequence[Mapping[str, Any]], HeadLike]: ...


async def list_audit_records(pages: AuditPages | None, request: Any, pb: ModuleType) -> Any:
    """``pb``: the service's generated messages module."""
    if pages is None:
        raise Unavailable("this server keeps no audit trail")
    size = page_size(request.page_size, default=DEFAULT_PAGE, maximum=MAX_PAGE)
    if request.after_seq < 0:
        raise InvalidInput("after_seq", "not negative", reason="out_of_range")
    if len(request.action) > MAX_ACTION:
        raise InvalidInput("action", f"at most {MAX_ACTION} characters", reason="too_long")
    records, head = await pages.page(request.after_seq, size, request.action)
    return pb.ListAuditRecordsResponse(
        records=[pb.AuditRecord(seq=r["seq"], recorded_at=to_timestamp(r["at"]),
                                actor=r["actor"], action=r["action"], targets=r["targets"],
                                hash=r["hash"]) for r in records],
        head_seq=head.count, head_hash=head.hash)
