"""The REST API fuzzed from its own OpenAPI document (schemathesis): for every declared
operation, requests generated from its declared parameters and bodies, valid ones and ones
the declaration refuses, sent to the running stack's API with the data dir's credential.
No answer may be a 5xx (a 503 only where the operation declares that exact status: the MCP
token exchange of a deployment without issuance), and every answer must be the one the
document declares (its status and body shape). Examples per operation and mode: the
``vera-fuzz`` profile's (10, derandomized)."""

from __future__ import annotations

import pytest
import requests
import schemathesis
from fuzz_stack import api_url, fuzz_settings
from hypothesis import given
from hypothesis.errors import Unsatisfiable
from schemathesis import Case, GenerationMode
from schemathesis.schemas import APIOperation
from schemathesis.specs.openapi.checks import response_schema_conformance

from vera.stack.launcher import LaunchedStack


def _fuzz(operation: APIOperation, mode: GenerationMode, url: str,
          session: requests.Session, credential: dict[str, str]) -> None:
    declared = set(operation.definition.raw["responses"])

    @fuzz_settings()
    @given(case=operation.as_strategy(generation_mode=mode))
    def call(case: Case) -> None:
        response = case.call(base_url=url, session=session, headers=credential)
        status = response.status_code
        assert status < 500 or (status != 500 and str(status) in declared), (
            case.as_curl_command(), status, response.text)
        case.validate_response(response, checks=[response_schema_conformance])

    call()


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_no_declared_operation_answers_a_server_error(stack: LaunchedStack,
                                                      mode: GenerationMode) -> None:
    url = api_url(stack)
    secret = (stack.data_dir / "local.secret").read_text().strip()
    credential = {"Authorization": f"Bearer {secret}"}
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) > 20
    failures: list[str] = []
    with requests.Session() as session:
        for operation in operations:
            try:
                _fuzz(operation, mode, url, session, credential)
            except Unsatisfiable:
                # Nothing to send wrong: an operation without parameters or body (a probe,
                # /identity/me) has no invalid request; its valid ones ran in positive mode.
                assert mode is GenerationMode.NEGATIVE, operation.label
            except (Exception, BaseExceptionGroup) as failed:  # every operation runs
                failures.append(f"{operation.label}: {failed!r}"[:2000])
    assert failures == []
