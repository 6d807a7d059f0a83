"""vera.rpc.refusals: what a front sends identity's audit trail, at most 64 counts a report,
and what identity did not take is kept for the next report."""

from __future__ import annotations

import pytest

from vera.rpc.refusals import MAX_COUNTS, QUOTA_REFUSED, RefusalTally


class Identity:
    def __init__(self) -> None:
        self.reports: list = []
        self.down = False

    async def RecordRefusals(self, request):
        if self.down:
            raise ConnectionError("identity is away")
        self.reports.append(request)


async def test_counts_are_kept_until_identity_takes_them() -> None:
    tally, identity = RefusalTally("api"), Identity()
    for _ in range(3):
        tally.count(QUOTA_REFUSED, "address")
    identity.down = True
    with pytest.raises(ConnectionError):
        await tally.report(identity, 10)  # type: ignore[arg-type]
    tally.count(QUOTA_REFUSED, "address")
    identity.down = False
    await tally.report(identity, 10)  # type: ignore[arg-type]
    await tally.report(identity, 10)  # type: ignore[arg-type]  # nothing left: nothing sent
    assert [(r.source, [(c.action, c.reason, c.count) for c in r.counts])
            for r in identity.reports] == [("api", [(QUOTA_REFUSED, "address", 4)])]


async def test_a_report_carries_at_most_max_counts() -> None:
    tally, identity = RefusalTally("gateway"), Identity()
    for n in range(MAX_COUNTS + 3):
        tally.count(QUOTA_REFUSED, f"bucket-{n:03d}")
    await tally.report(identity, 10)  # type: ignore[arg-type]
    await tally.report(identity, 10)  # type: ignore[arg-type]
    assert [len(r.counts) for r in identity.reports] == [MAX_COUNTS, 3]
