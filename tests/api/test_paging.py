"""Every REST list route reads ``page_size`` through one reader: anything that is not a
non-negative int32 is invalid_input naming ``page_size`` (never a bare 500)."""

from __future__ import annotations

import pytest

from vera.identity.v1 import identity_pb2 as pb
from vera.identity.v1 import identity_pb2_grpc
from vera.rpc.client import open_channel

BAD_SIZES = ["99999999999999999999", str(2**31), "-1", "ten", "1.5", ""]


async def shared_project(identity_address: str, principal_id: str) -> None:
    channel = open_channel(identity_address, deadline_seconds=10)
    try:
        await identity_pb2_grpc.IdentityServiceStub(channel).EnsureProject(
            pb.EnsureProjectRequest(principal_id=principal_id, slug="payments"))
    finally:
        await channel.close()


@pytest.mark.parametrize("size", BAD_SIZES)
async def test_a_bad_page_size_is_invalid_input_on_every_list_route(rest, identity_address,
                                                                   size: str) -> None:
    me = (await rest.client.get("/identity/me", headers=rest.credentials)).json()
    await shared_project(identity_address, me["principal_id"])
    workspace = (await rest.client.post("/identity/workspaces", json={"slug": "acme"},
                                        headers=rest.credentials)).json()
    for path in ("/identity/api-keys",
                 f"/identity/workspaces/{workspace['workspace_id']}/members",
                 "/curation/projects/payments/proposals"):
        response = await rest.client.get(path, params={"page_size": size},
                                         headers=rest.credentials)
        assert response.status_code == 400, path
        error = response.json()["error"]
        assert (error["code"], error["field"]) == ("invalid_input", "page_size"), path


async def test_the_largest_int32_page_size_reaches_the_service(rest) -> None:
    """In range for the wire, so the API's reader lets it through and the identity service
    decides: its refusal names its own maximum, which the API's reader never gives."""
    int32_max = 2**31 - 1
    response = await rest.client.get(
        "/identity/api-keys", params={"page_size": int32_max}, headers=rest.credentials
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["field"], error["reason"]) == (
        "invalid_input",
        "page_size",
        "out_of_range",
    )
    assert 0 < int(error["maximum"]) < int32_max


async def test_a_page_size_past_int32_is_refused_by_the_apis_reader(rest) -> None:
    """The contrast that makes the test above mean something: past the wire's range the
    API refuses before any service call, so no service maximum is named."""
    response = await rest.client.get(
        "/identity/api-keys", params={"page_size": 2**31}, headers=rest.credentials
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["field"], error["reason"]) == ("page_size", "out_of_range")
    assert "maximum" not in error
