from __future__ import annotations

import uuid

import pytest

from vera.config import ConfigError, Settings
from vera.errors import AmbiguousProject, InvalidInput, ProjectOutOfScope
from vera.identity.v1 import identity_pb2 as pb
from vera.services.identity import server

RESOLUTION = pb.RepositoryResolution


def new_id() -> str:
    return str(uuid.uuid4())


async def principal(identity, principal_id: str | None = None) -> pb.Principal:
    response = await identity.stub.EnsureLocalPrincipal(
        pb.EnsureLocalPrincipalRequest(principal_id=principal_id or new_id())
    )
    return response.principal


async def project(identity, owner: str, slug: str) -> pb.Project:
    response = await identity.stub.EnsureProject(
        pb.EnsureProjectRequest(principal_id=owner, slug=slug)
    )
    return response.project


async def test_create_requires_a_dsn() -> None:
    with pytest.raises(ConfigError, match="VERA_DATABASE__DSN"):
        await server.create(Settings(database={"dsn": None}), "127.0.0.1:0")


async def test_ensure_local_principal_is_idempotent(identity) -> None:
    pid = new_id()
    first = await identity.stub.EnsureLocalPrincipal(
        pb.EnsureLocalPrincipalRequest(principal_id=pid)
    )
    second = await identity.stub.EnsureLocalPrincipal(
        pb.EnsureLocalPrincipalRequest(principal_id=pid.upper())
    )
    assert first.created is True
    assert second.created is False
    assert first.principal == second.principal
    assert first.principal.principal_id == pid
    assert first.principal.display_name == "local"

    scopes = await identity.stub.ResolveScopes(pb.ResolveScopesRequest(principal_id=pid))
    assert scopes.personal_scope_id == first.principal.personal_scope_id
    [personal] = scopes.projects
    assert personal.project_id == first.principal.personal_scope_id
    assert personal.kind == pb.PROJECT_KIND_PERSONAL
    assert personal.slug == f"personal-{pid[:8]}"
    assert personal.owner_principal_id == pid
    assert personal.workspace_id == ""


async def test_personal_slug_collision_falls_back_to_the_full_id(identity) -> None:
    first = "abcdef01-0000-4000-8000-000000000001"
    second = "abcdef01-0000-4000-8000-000000000002"
    await principal(identity, first)
    other = await principal(identity, second)
    scopes = await identity.stub.ResolveScopes(pb.ResolveScopesRequest(principal_id=second))
    assert scopes.projects[0].project_id == other.personal_scope_id
    assert scopes.projects[0].slug == "personal-" + uuid.UUID(second).hex


async def test_get_principal(identity) -> None:
    created = await principal(identity)
    got = await identity.stub.GetPrincipal(
        pb.GetPrincipalRequest(principal_id=created.principal_id)
    )
    assert got.principal == created

    with pytest.raises(InvalidInput) as exc:
        await identity.stub.GetPrincipal(pb.GetPrincipalRequest(principal_id=new_id()))
    assert exc.value.metadata == {"field": "principal_id", "reason": "not_found"}

    with pytest.raises(InvalidInput) as exc:
        await identity.stub.GetPrincipal(pb.GetPrincipalRequest(principal_id="not-a-uuid"))
    assert exc.value.field == "principal_id"


async def test_unknown_principal_has_no_scopes(identity) -> None:
    with pytest.raises(InvalidInput) as exc:
        await identity.stub.ResolveScopes(pb.ResolveScopesRequest(principal_id=new_id()))
    assert exc.value.reason == "INVALID_INPUT"
    assert exc.value.metadata == {"field": "principal_id", "reason": "not_found"}


async def test_ensure_project(identity) -> None:
    owner = await principal(identity)
    created = await identity.stub.EnsureProject(
        pb.EnsureProjectRequest(
            principal_id=owner.principal_id, slug="payments", display_name="Payments"
        )
    )
    assert created.created is True
    assert created.project.slug == "payments"
    assert created.project.display_name == "Payments"
    assert created.project.kind == pb.PROJECT_KIND_SHARED
    assert created.project.owner_principal_id == owner.principal_id

    again = await identity.stub.EnsureProject(
        pb.EnsureProjectRequest(principal_id=owner.principal_id, slug="payments")
    )
    assert again.created is False
    assert again.project == created.project

    defaulted = await project(identity, owner.principal_id, "billing")
    assert defaulted.display_name == "billing"


async def test_ensure_project_owned_by_someone_else_is_out_of_scope(identity) -> None:
    owner = await principal(identity)
    stranger = await principal(identity)
    await project(identity, owner.principal_id, "payments")
    with pytest.raises(ProjectOutOfScope) as exc:
        await project(identity, stranger.principal_id, "payments")
    assert exc.value.reason == "PROJECT_OUT_OF_SCOPE"


@pytest.mark.parametrize(
    ("slug", "reason"),
    [
        ("", None),
        ("Payments", None),
        ("-payments", None),
        ("pay_ments", None),
        ("a" * 64, None),
        ("personal-abcdef01", "reserved_slug"),
    ],
)
async def test_ensure_project_validates_the_slug(identity, slug: str, reason: str | None) -> None:
    owner = await principal(identity)
    with pytest.raises(InvalidInput) as exc:
        await project(identity, owner.principal_id, slug)
    assert exc.value.field == "project"
    assert exc.value.metadata.get("reason") == reason


async def test_ensure_project_for_an_unknown_principal(identity) -> None:
    with pytest.raises(InvalidInput) as exc:
        await project(identity, new_id(), "payments")
    assert exc.value.metadata == {"field": "principal_id", "reason": "not_found"}


async def test_resolve_scopes_covers_owned_and_workspace_projects(identity) -> None:
    me = await principal(identity)
    other = await principal(identity)
    mine = await project(identity, me.principal_id, "zeta")
    theirs_shared = await project(identity, other.principal_id, "alpha")
    await project(identity, other.principal_id, "hidden")

    workspace = await identity.store.create_workspace(uuid.UUID(other.principal_id), "acme")
    await identity.store.assign_project_workspace(uuid.UUID(theirs_shared.project_id), workspace)
    await identity.store.add_workspace_member(workspace, uuid.UUID(me.principal_id))

    scopes = await identity.stub.ResolveScopes(
        pb.ResolveScopesRequest(principal_id=me.principal_id)
    )
    assert scopes.personal_scope_id == me.personal_scope_id
    assert [p.project_id for p in scopes.projects] == [
        me.personal_scope_id,
        theirs_shared.project_id,
        mine.project_id,
    ]
    assert scopes.projects[1].workspace_id == str(workspace)

    their_scopes = await identity.stub.ResolveScopes(
        pb.ResolveScopesRequest(principal_id=other.principal_id)
    )
    assert [p.slug for p in their_scopes.projects][1:] == ["alpha", "hidden"]
    assert me.personal_scope_id not in {p.project_id for p in their_scopes.projects}


async def test_resolve_project_explicit_by_slug_and_id(identity) -> None:
    me = await principal(identity)
    payments = await project(identity, me.principal_id, "payments")
    await project(identity, me.principal_id, "billing")

    by_slug = await identity.stub.ResolveProject(
        pb.ResolveProjectRequest(principal_id=me.principal_id, project="payments")
    )
    by_id = await identity.stub.ResolveProject(
        pb.ResolveProjectRequest(principal_id=me.principal_id, project=payments.project_id)
    )
    personal = await identity.stub.ResolveProject(
        pb.ResolveProjectRequest(principal_id=me.principal_id, project=me.personal_scope_id)
    )
    assert by_slug.project == payments
    assert by_id.project == payments
    assert personal.project.kind == pb.PROJECT_KIND_PERSONAL


async def test_resolve_project_out_of_scope_is_indistinguishable(identity) -> None:
    me = await principal(identity)
    other = await principal(identity)
    theirs = await project(identity, other.principal_id, "theirs")
    for reference in ("theirs", theirs.project_id, "missing", new_id(), other.personal_scope_id):
        with pytest.raises(ProjectOutOfScope) as exc:
            await identity.stub.ResolveProject(
                pb.ResolveProjectRequest(principal_id=me.principal_id, project=reference)
            )
        assert exc.value.reason == "PROJECT_OUT_OF_SCOPE"
        assert exc.value.metadata == {}


async def test_resolve_project_without_reference(identity) -> None:
    me = await principal(identity)
    request = pb.ResolveProjectRequest(principal_id=me.principal_id)

    # no shared project: the personal scope
    fallback = await identity.stub.ResolveProject(request)
    assert fallback.project.project_id == me.personal_scope_id

    # exactly one shared project: it
    payments = await project(identity, me.principal_id, "payments")
    single = await identity.stub.ResolveProject(request)
    assert single.project == payments

    # several: ambiguous, naming the candidates
    await project(identity, me.principal_id, "billing")
    with pytest.raises(AmbiguousProject) as exc:
        await identity.stub.ResolveProject(request)
    assert exc.value.reason == "AMBIGUOUS_PROJECT"
    assert exc.value.metadata == {"candidates": "billing,payments"}


async def test_map_repository(identity) -> None:
    me = await principal(identity)
    payments = await project(identity, me.principal_id, "payments")
    request = pb.MapRepositoryRequest(
        principal_id=me.principal_id,
        project_id=payments.project_id,
        repository="https://token@GitHub.com/Acme/Payments.git",
    )
    first = await identity.stub.MapRepository(request)
    again = await identity.stub.MapRepository(
        pb.MapRepositoryRequest(
            principal_id=me.principal_id,
            project_id=payments.project_id,
            repository="git@github.com:Acme/Payments.git",
        )
    )
    assert (first.canonical_repository, first.created) == ("github.com/Acme/Payments", True)
    assert (again.canonical_repository, again.created) == ("github.com/Acme/Payments", False)


async def test_map_repository_rejections(identity) -> None:
    me = await principal(identity)
    other = await principal(identity)
    mine = await project(identity, me.principal_id, "mine")
    theirs = await project(identity, other.principal_id, "theirs")

    for project_id in (theirs.project_id, new_id(), "not-a-uuid"):
        with pytest.raises(ProjectOutOfScope):
            await identity.stub.MapRepository(
                pb.MapRepositoryRequest(
                    principal_id=me.principal_id,
                    project_id=project_id,
                    repository="github.com/Acme/Payments",
                )
            )

    with pytest.raises(InvalidInput) as exc:
        await identity.stub.MapRepository(
            pb.MapRepositoryRequest(
                principal_id=me.principal_id,
                project_id=mine.project_id,
                repository="/home/dev/payments",
            )
        )
    assert exc.value.metadata == {"field": "repository", "reason": "unsupported_repository"}

    with pytest.raises(InvalidInput) as exc:
        await identity.stub.MapRepository(
            pb.MapRepositoryRequest(
                principal_id=me.principal_id,
                project_id=me.personal_scope_id,
                repository="github.com/Acme/Payments",
            )
        )
    assert exc.value.metadata == {"field": "project_id", "reason": "not_shared"}


async def resolve(identity, principal_id: str, repository: str) -> pb.ResolveRepositoryResponse:
    return await identity.stub.ResolveRepository(
        pb.ResolveRepositoryRequest(principal_id=principal_id, repository=repository)
    )


async def map_repo(identity, owner: str, project_id: str, repository: str) -> None:
    await identity.stub.MapRepository(
        pb.MapRepositoryRequest(principal_id=owner, project_id=project_id, repository=repository)
    )


async def test_resolve_repository_personal_only(identity) -> None:
    me = await principal(identity)
    result = await resolve(identity, me.principal_id, "git@github.com:Acme/Payments.git")
    assert result.resolution == RESOLUTION.Value("REPOSITORY_RESOLUTION_PERSONAL_ONLY")
    assert result.canonical_repository == "github.com/Acme/Payments"
    assert list(result.candidates) == []


async def test_resolve_repository_selected_unmapped_unsupported(identity) -> None:
    me = await principal(identity)
    payments = await project(identity, me.principal_id, "payments")
    await project(identity, me.principal_id, "billing")
    await map_repo(identity, me.principal_id, payments.project_id, "github.com/Acme/Payments")

    selected = await resolve(identity, me.principal_id, "https://u:p@github.com/Acme/Payments/")
    assert selected.resolution == RESOLUTION.Value("REPOSITORY_RESOLUTION_SELECTED")
    assert selected.canonical_repository == "github.com/Acme/Payments"
    assert list(selected.candidates) == [payments]

    # path case is preserved, so a differently cased path is another repository
    unmapped = await resolve(identity, me.principal_id, "https://github.com/acme/payments")
    assert unmapped.resolution == RESOLUTION.Value("REPOSITORY_RESOLUTION_UNMAPPED")
    assert unmapped.canonical_repository == "github.com/acme/payments"
    assert list(unmapped.candidates) == []

    unsupported = await resolve(identity, me.principal_id, "/home/dev/payments")
    assert unsupported.resolution == RESOLUTION.Value(
        "REPOSITORY_RESOLUTION_UNSUPPORTED_REPOSITORY"
    )
    assert unsupported.canonical_repository == ""
    assert list(unsupported.candidates) == []


async def test_resolve_repository_selection_required(identity) -> None:
    me = await principal(identity)
    other = await principal(identity)
    alpha = await project(identity, me.principal_id, "alpha")
    beta = await project(identity, me.principal_id, "beta")
    theirs = await project(identity, other.principal_id, "theirs")
    for owner, target in ((me, alpha), (me, beta), (other, theirs)):
        await map_repo(identity, owner.principal_id, target.project_id, "github.com/Acme/Mono")

    several = await resolve(identity, me.principal_id, "git@github.com:Acme/Mono.git")
    assert several.resolution == RESOLUTION.Value("REPOSITORY_RESOLUTION_SELECTION_REQUIRED")
    # only readable projects are candidates
    assert [p.slug for p in several.candidates] == ["alpha", "beta"]

    theirs_only = await resolve(identity, other.principal_id, "github.com/Acme/Mono")
    assert theirs_only.resolution == RESOLUTION.Value("REPOSITORY_RESOLUTION_SELECTED")
    assert [p.slug for p in theirs_only.candidates] == ["theirs"]


async def test_resolve_repository_without_identity(identity) -> None:
    me = await principal(identity)
    alpha = await project(identity, me.principal_id, "alpha")

    single = await resolve(identity, me.principal_id, "")
    assert single.resolution == RESOLUTION.Value("REPOSITORY_RESOLUTION_SELECTED")
    assert single.canonical_repository == ""
    assert list(single.candidates) == [alpha]

    beta = await project(identity, me.principal_id, "beta")
    several = await resolve(identity, me.principal_id, "")
    assert several.resolution == RESOLUTION.Value("REPOSITORY_RESOLUTION_SELECTION_REQUIRED")
    assert list(several.candidates) == [alpha, beta]
