"""The one FactInput -> domain mapping that IngestKnowledge and CorrectFact share."""

from __future__ import annotations

import uuid
from dataclasses import fields
from datetime import UTC, datetime

import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from vera.errors import InvalidInput
from vera.knowledge.v1 import knowledge_service_pb2 as pb
from vera.services.knowledge import convert

SCOPE = uuid.uuid4()
FROM = datetime(2025, 1, 1, tzinfo=UTC)
TO = datetime(2026, 1, 1, tzinfo=UTC)


def ts(value: datetime) -> Timestamp:
    out = Timestamp()
    out.FromDatetime(value)
    return out


def test_every_fact_input_field_reaches_the_domain_fact() -> None:
    message = pb.FactInput(
        subject="payments-api", predicate="uses_database", object="postgres",
        source_id="adr-7", evidence="we use postgres", locator="L1",
        valid_from=ts(FROM), valid_to=ts(TO), trust_tier=2, authority=0.5,
        repository="github.com/acme/pay", branch="main", code_path="svc/db.py",
        document_type="adr",
    )
    mapped = convert.fact_input(0, SCOPE, message)
    carried = {f.name for f in fields(mapped)} - {"fact_key"}
    assert {f.name for f in pb.FactInput.DESCRIPTOR.fields} == carried
    assert (mapped.valid_from, mapped.valid_to) == (FROM, TO)
    assert (mapped.trust_tier, mapped.authority) == (2, 0.5)
    assert mapped.document_type == "adr" and mapped.code_path == "svc/db.py"


@pytest.mark.parametrize(("path", "field"), [("facts[3]", "facts[3].valid_to"), ("", "valid_to")])
def test_a_bad_timestamp_names_its_path(path: str, field: str) -> None:
    message = pb.FactInput(subject="s", predicate="p", object="o",
                           valid_to=Timestamp(seconds=-62135596801))
    with pytest.raises(InvalidInput) as caught:
        convert.fact_input(3, SCOPE, message, path)
    assert caught.value.field == field
