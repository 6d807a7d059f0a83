"""The REST API describes itself: every route it serves is declared in one OpenAPI 3.1
document at ``/openapi.json``, which a validator accepts, with VERA's error answers."""

from __future__ import annotations

from openapi_spec_validator import validate
from starlette.routing import BaseRoute, Mount, Route

from vera.api.app import build_app
from vera.config import Settings

NOT_DOCUMENTED = {"/openapi.json"}


def _routes(routes: list[BaseRoute]) -> list[Route]:
    """Every route the app serves but the console's pages (included routers walked)."""
    found: list[Route] = []
    for route in routes:
        if isinstance(route, Route):
            found.append(route)
        elif not isinstance(route, Mount) and hasattr(route, "original_router"):
            found += _routes(route.original_router.routes)
    return found


async def test_the_document_is_served_and_valid_openapi_3_1(rest) -> None:
    response = await rest.client.get("/openapi.json")
    assert response.status_code == 200
    document = response.json()
    assert document["openapi"].startswith("3.1.")
    validate(document)


def test_every_route_is_declared_with_its_bodies_and_errors() -> None:
    app = build_app(Settings())
    document = app.openapi()
    served = {(method, route.path.replace(":path}", "}")) for route in _routes(app.routes)
              for method in route.methods - {"HEAD"} if route.path not in NOT_DOCUMENTED}
    declared = {(method.upper(), path) for path, operations in document["paths"].items()
                for method in operations}
    assert served == declared
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            assert {"4XX", "5XX"} <= set(operation["responses"]), (method, path)
            success = [c for c in operation["responses"] if c.startswith("2")]
            assert success, (method, path)
            assert all("application/json" in operation["responses"][c].get("content", {})
                       for c in success), (method, path)
    ingest = document["paths"]["/curation/projects/{project}/ingest"]["post"]
    assert ingest["requestBody"]["required"] is True
