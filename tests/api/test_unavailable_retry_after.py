"""A 503 ``unavailable`` answer asks the client to come back (``Retry-After``): nothing was
done, and a stack heals a lost service or database in seconds; `vera` commands wait as
asked (vera.api_client) instead of stopping a bulk load half-way."""

from __future__ import annotations

from api.errors import UNAVAILABLE_RETRY_AFTER_SECONDS, error_response
from vera.errors import Unavailable


def test_unavailable_answers_carry_retry_after() -> None:
    response = error_response(Unavailable("the database is unreachable"))
    assert response.status_code == 503
    assert response.headers["retry-after"] == str(UNAVAILABLE_RETRY_AFTER_SECONDS)
