import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class FactState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FACT_STATE_UNSPECIFIED: _ClassVar[FactState]
    FACT_STATE_PROPOSED: _ClassVar[FactState]
    FACT_STATE_ACTIVE: _ClassVar[FactState]
    FACT_STATE_DISPUTED: _ClassVar[FactState]
    FACT_STATE_RETRACTED: _ClassVar[FactState]
    FACT_STATE_SUPERSEDED: _ClassVar[FactState]

class VerificationState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    VERIFICATION_STATE_UNSPECIFIED: _ClassVar[VerificationState]
    VERIFICATION_STATE_VERIFIED: _ClassVar[VerificationState]
    VERIFICATION_STATE_UNVERIFIED: _ClassVar[VerificationState]
    VERIFICATION_STATE_WITHDRAWN: _ClassVar[VerificationState]

class ProposalOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PROPOSAL_OUTCOME_UNSPECIFIED: _ClassVar[ProposalOutcome]
    PROPOSAL_OUTCOME_CREATED: _ClassVar[ProposalOutcome]
    PROPOSAL_OUTCOME_DEDUPLICATED: _ClassVar[ProposalOutcome]
    PROPOSAL_OUTCOME_SKIPPED: _ClassVar[ProposalOutcome]
    PROPOSAL_OUTCOME_CONFLICTED: _ClassVar[ProposalOutcome]
    PROPOSAL_OUTCOME_REJECTED: _ClassVar[ProposalOutcome]

class ChangeKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CHANGE_KIND_UNSPECIFIED: _ClassVar[ChangeKind]
    CHANGE_KIND_FACT_UPSERTED: _ClassVar[ChangeKind]
    CHANGE_KIND_SOURCE_UPSERTED: _ClassVar[ChangeKind]
    CHANGE_KIND_FEEDBACK_RECORDED: _ClassVar[ChangeKind]
    CHANGE_KIND_FACT_ERASED: _ClassVar[ChangeKind]
FACT_STATE_UNSPECIFIED: FactState
FACT_STATE_PROPOSED: FactState
FACT_STATE_ACTIVE: FactState
FACT_STATE_DISPUTED: FactState
FACT_STATE_RETRACTED: FactState
FACT_STATE_SUPERSEDED: FactState
VERIFICATION_STATE_UNSPECIFIED: VerificationState
VERIFICATION_STATE_VERIFIED: VerificationState
VERIFICATION_STATE_UNVERIFIED: VerificationState
VERIFICATION_STATE_WITHDRAWN: VerificationState
PROPOSAL_OUTCOME_UNSPECIFIED: ProposalOutcome
PROPOSAL_OUTCOME_CREATED: ProposalOutcome
PROPOSAL_OUTCOME_DEDUPLICATED: ProposalOutcome
PROPOSAL_OUTCOME_SKIPPED: ProposalOutcome
PROPOSAL_OUTCOME_CONFLICTED: ProposalOutcome
PROPOSAL_OUTCOME_REJECTED: ProposalOutcome
CHANGE_KIND_UNSPECIFIED: ChangeKind
CHANGE_KIND_FACT_UPSERTED: ChangeKind
CHANGE_KIND_SOURCE_UPSERTED: ChangeKind
CHANGE_KIND_FEEDBACK_RECORDED: ChangeKind
CHANGE_KIND_FACT_ERASED: ChangeKind

class Source(_message.Message):
    __slots__ = ("source_id", "source_type", "title", "uri", "observed_at")
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    URI_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_AT_FIELD_NUMBER: _ClassVar[int]
    source_id: str
    source_type: str
    title: str
    uri: str
    observed_at: _timestamp_pb2.Timestamp
    def __init__(self, source_id: _Optional[str] = ..., source_type: _Optional[str] = ..., title: _Optional[str] = ..., uri: _Optional[str] = ..., observed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Citation(_message.Message):
    __slots__ = ("source_id", "locator", "title", "uri", "excerpt", "verification", "source_type", "observed_at", "stale", "stale_reason")
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    LOCATOR_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    URI_FIELD_NUMBER: _ClassVar[int]
    EXCERPT_FIELD_NUMBER: _ClassVar[int]
    VERIFICATION_FIELD_NUMBER: _ClassVar[int]
    SOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_AT_FIELD_NUMBER: _ClassVar[int]
    STALE_FIELD_NUMBER: _ClassVar[int]
    STALE_REASON_FIELD_NUMBER: _ClassVar[int]
    source_id: str
    locator: str
    title: str
    uri: str
    excerpt: str
    verification: VerificationState
    source_type: str
    observed_at: _timestamp_pb2.Timestamp
    stale: bool
    stale_reason: str
    def __init__(self, source_id: _Optional[str] = ..., locator: _Optional[str] = ..., title: _Optional[str] = ..., uri: _Optional[str] = ..., excerpt: _Optional[str] = ..., verification: _Optional[_Union[VerificationState, str]] = ..., source_type: _Optional[str] = ..., observed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., stale: _Optional[bool] = ..., stale_reason: _Optional[str] = ...) -> None: ...

class Fact(_message.Message):
    __slots__ = ("fact_key", "version_id", "scope_id", "subject", "predicate", "object", "state", "trust_tier", "authority", "valid_from", "valid_to", "recorded_at", "superseded_at", "repository", "branch", "code_path", "document_type", "source_type", "citations", "conflicting_fact_keys", "superseded_by", "corrects")
    FACT_KEY_FIELD_NUMBER: _ClassVar[int]
    VERSION_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    PREDICATE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TRUST_TIER_FIELD_NUMBER: _ClassVar[int]
    AUTHORITY_FIELD_NUMBER: _ClassVar[int]
    VALID_FROM_FIELD_NUMBER: _ClassVar[int]
    VALID_TO_FIELD_NUMBER: _ClassVar[int]
    RECORDED_AT_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDED_AT_FIELD_NUMBER: _ClassVar[int]
    REPOSITORY_FIELD_NUMBER: _ClassVar[int]
    BRANCH_FIELD_NUMBER: _ClassVar[int]
    CODE_PATH_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    CITATIONS_FIELD_NUMBER: _ClassVar[int]
    CONFLICTING_FACT_KEYS_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDED_BY_FIELD_NUMBER: _ClassVar[int]
    CORRECTS_FIELD_NUMBER: _ClassVar[int]
    fact_key: str
    version_id: str
    scope_id: str
    subject: str
    predicate: str
    object: str
    state: FactState
    trust_tier: int
    authority: float
    valid_from: _timestamp_pb2.Timestamp
    valid_to: _timestamp_pb2.Timestamp
    recorded_at: _timestamp_pb2.Timestamp
    superseded_at: _timestamp_pb2.Timestamp
    repository: str
    branch: str
    code_path: str
    document_type: str
    source_type: str
    citations: _containers.RepeatedCompositeFieldContainer[Citation]
    conflicting_fact_keys: _containers.RepeatedScalarFieldContainer[str]
    superseded_by: str
    corrects: str
    def __init__(self, fact_key: _Optional[str] = ..., version_id: _Optional[str] = ..., scope_id: _Optional[str] = ..., subject: _Optional[str] = ..., predicate: _Optional[str] = ..., object: _Optional[str] = ..., state: _Optional[_Union[FactState, str]] = ..., trust_tier: _Optional[int] = ..., authority: _Optional[float] = ..., valid_from: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., valid_to: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., recorded_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., superseded_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., repository: _Optional[str] = ..., branch: _Optional[str] = ..., code_path: _Optional[str] = ..., document_type: _Optional[str] = ..., source_type: _Optional[str] = ..., citations: _Optional[_Iterable[_Union[Citation, _Mapping]]] = ..., conflicting_fact_keys: _Optional[_Iterable[str]] = ..., superseded_by: _Optional[str] = ..., corrects: _Optional[str] = ...) -> None: ...

class Evidence(_message.Message):
    __slots__ = ("evidence_id", "text", "locator")
    EVIDENCE_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    LOCATOR_FIELD_NUMBER: _ClassVar[int]
    evidence_id: str
    text: str
    locator: str
    def __init__(self, evidence_id: _Optional[str] = ..., text: _Optional[str] = ..., locator: _Optional[str] = ...) -> None: ...

class Assertion(_message.Message):
    __slots__ = ("assertion_id", "supports", "trust_tier", "authority", "verification", "source", "evidence", "recorded_at")
    ASSERTION_ID_FIELD_NUMBER: _ClassVar[int]
    SUPPORTS_FIELD_NUMBER: _ClassVar[int]
    TRUST_TIER_FIELD_NUMBER: _ClassVar[int]
    AUTHORITY_FIELD_NUMBER: _ClassVar[int]
    VERIFICATION_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    RECORDED_AT_FIELD_NUMBER: _ClassVar[int]
    assertion_id: str
    supports: bool
    trust_tier: int
    authority: float
    verification: VerificationState
    source: Source
    evidence: _containers.RepeatedCompositeFieldContainer[Evidence]
    recorded_at: _timestamp_pb2.Timestamp
    def __init__(self, assertion_id: _Optional[str] = ..., supports: _Optional[bool] = ..., trust_tier: _Optional[int] = ..., authority: _Optional[float] = ..., verification: _Optional[_Union[VerificationState, str]] = ..., source: _Optional[_Union[Source, _Mapping]] = ..., evidence: _Optional[_Iterable[_Union[Evidence, _Mapping]]] = ..., recorded_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class TaskContext(_message.Message):
    __slots__ = ("runtime", "session_ref", "task_ref", "repository_ref")
    RUNTIME_FIELD_NUMBER: _ClassVar[int]
    SESSION_REF_FIELD_NUMBER: _ClassVar[int]
    TASK_REF_FIELD_NUMBER: _ClassVar[int]
    REPOSITORY_REF_FIELD_NUMBER: _ClassVar[int]
    runtime: str
    session_ref: str
    task_ref: str
    repository_ref: str
    def __init__(self, runtime: _Optional[str] = ..., session_ref: _Optional[str] = ..., task_ref: _Optional[str] = ..., repository_ref: _Optional[str] = ...) -> None: ...

class ProposalAttempt(_message.Message):
    __slots__ = ("attempt_id", "outcome", "reason", "fact_key", "subject", "predicate", "object", "fact_state", "context", "created_at", "superseded_by", "conflicting_fact_keys")
    ATTEMPT_ID_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    FACT_KEY_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    PREDICATE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    FACT_STATE_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDED_BY_FIELD_NUMBER: _ClassVar[int]
    CONFLICTING_FACT_KEYS_FIELD_NUMBER: _ClassVar[int]
    attempt_id: str
    outcome: ProposalOutcome
    reason: str
    fact_key: str
    subject: str
    predicate: str
    object: str
    fact_state: FactState
    context: TaskContext
    created_at: _timestamp_pb2.Timestamp
    superseded_by: str
    conflicting_fact_keys: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, attempt_id: _Optional[str] = ..., outcome: _Optional[_Union[ProposalOutcome, str]] = ..., reason: _Optional[str] = ..., fact_key: _Optional[str] = ..., subject: _Optional[str] = ..., predicate: _Optional[str] = ..., object: _Optional[str] = ..., fact_state: _Optional[_Union[FactState, str]] = ..., context: _Optional[_Union[TaskContext, _Mapping]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., superseded_by: _Optional[str] = ..., conflicting_fact_keys: _Optional[_Iterable[str]] = ...) -> None: ...

class Change(_message.Message):
    __slots__ = ("position", "kind", "fact", "created_at", "erased_version_id")
    POSITION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    FACT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    ERASED_VERSION_ID_FIELD_NUMBER: _ClassVar[int]
    position: int
    kind: ChangeKind
    fact: Fact
    created_at: _timestamp_pb2.Timestamp
    erased_version_id: str
    def __init__(self, position: _Optional[int] = ..., kind: _Optional[_Union[ChangeKind, str]] = ..., fact: _Optional[_Union[Fact, _Mapping]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., erased_version_id: _Optional[str] = ...) -> None: ...

class FactVersion(_message.Message):
    __slots__ = ("version_id", "state", "valid_from", "valid_to", "recorded_at", "superseded_at", "superseded_by", "corrects", "correction_reason")
    VERSION_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    VALID_FROM_FIELD_NUMBER: _ClassVar[int]
    VALID_TO_FIELD_NUMBER: _ClassVar[int]
    RECORDED_AT_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDED_AT_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDED_BY_FIELD_NUMBER: _ClassVar[int]
    CORRECTS_FIELD_NUMBER: _ClassVar[int]
    CORRECTION_REASON_FIELD_NUMBER: _ClassVar[int]
    version_id: str
    state: FactState
    valid_from: _timestamp_pb2.Timestamp
    valid_to: _timestamp_pb2.Timestamp
    recorded_at: _timestamp_pb2.Timestamp
    superseded_at: _timestamp_pb2.Timestamp
    superseded_by: str
    corrects: str
    correction_reason: str
    def __init__(self, version_id: _Optional[str] = ..., state: _Optional[_Union[FactState, str]] = ..., valid_from: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., valid_to: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., recorded_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., superseded_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., superseded_by: _Optional[str] = ..., corrects: _Optional[str] = ..., correction_reason: _Optional[str] = ...) -> None: ...

class Entity(_message.Message):
    __slots__ = ("entity_id", "scope_id", "name", "aliases", "kind")
    ENTITY_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ALIASES_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    entity_id: str
    scope_id: str
    name: str
    aliases: _containers.RepeatedScalarFieldContainer[str]
    kind: str
    def __init__(self, entity_id: _Optional[str] = ..., scope_id: _Optional[str] = ..., name: _Optional[str] = ..., aliases: _Optional[_Iterable[str]] = ..., kind: _Optional[str] = ...) -> None: ...

class SourceVersion(_message.Message):
    __slots__ = ("version", "source_type", "title", "uri", "observed_at", "recorded_at")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    SOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    URI_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_AT_FIELD_NUMBER: _ClassVar[int]
    RECORDED_AT_FIELD_NUMBER: _ClassVar[int]
    version: int
    source_type: str
    title: str
    uri: str
    observed_at: _timestamp_pb2.Timestamp
    recorded_at: _timestamp_pb2.Timestamp
    def __init__(self, version: _Optional[int] = ..., source_type: _Optional[str] = ..., title: _Optional[str] = ..., uri: _Optional[str] = ..., observed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., recorded_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class SourceFreshness(_message.Message):
    __slots__ = ("stale", "age_days", "stale_after_days", "reason")
    STALE_FIELD_NUMBER: _ClassVar[int]
    AGE_DAYS_FIELD_NUMBER: _ClassVar[int]
    STALE_AFTER_DAYS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    stale: bool
    age_days: int
    stale_after_days: int
    reason: str
    def __init__(self, stale: _Optional[bool] = ..., age_days: _Optional[int] = ..., stale_after_days: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class GraphEdge(_message.Message):
    __slots__ = ("fact", "hop", "from_node", "to_node")
    FACT_FIELD_NUMBER: _ClassVar[int]
    HOP_FIELD_NUMBER: _ClassVar[int]
    FROM_NODE_FIELD_NUMBER: _ClassVar[int]
    TO_NODE_FIELD_NUMBER: _ClassVar[int]
    fact: Fact
    hop: int
    from_node: str
    to_node: str
    def __init__(self, fact: _Optional[_Union[Fact, _Mapping]] = ..., hop: _Optional[int] = ..., from_node: _Optional[str] = ..., to_node: _Optional[str] = ...) -> None: ...

class ConflictGroup(_message.Message):
    __slots__ = ("scope_id", "subject", "predicate", "facts")
    SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    PREDICATE_FIELD_NUMBER: _ClassVar[int]
    FACTS_FIELD_NUMBER: _ClassVar[int]
    scope_id: str
    subject: str
    predicate: str
    facts: _containers.RepeatedCompositeFieldContainer[Fact]
    def __init__(self, scope_id: _Optional[str] = ..., subject: _Optional[str] = ..., predicate: _Optional[str] = ..., facts: _Optional[_Iterable[_Union[Fact, _Mapping]]] = ...) -> None: ...

class ScopeChange(_message.Message):
    __slots__ = ("position", "change", "scope_id", "fact", "source_id", "created_at", "actor_principal_id")
    POSITION_FIELD_NUMBER: _ClassVar[int]
    CHANGE_FIELD_NUMBER: _ClassVar[int]
    SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    FACT_FIELD_NUMBER: _ClassVar[int]
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    ACTOR_PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    position: int
    change: str
    scope_id: str
    fact: Fact
    source_id: str
    created_at: _timestamp_pb2.Timestamp
    actor_principal_id: str
    def __init__(self, position: _Optional[int] = ..., change: _Optional[str] = ..., scope_id: _Optional[str] = ..., fact: _Optional[_Union[Fact, _Mapping]] = ..., source_id: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., actor_principal_id: _Optional[str] = ...) -> None: ...

class DerivationRun(_message.Message):
    __slots__ = ("run_id", "scope_id", "change_position", "algorithm", "seed", "summarizer", "fact_count", "entity_count", "created_at")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    CHANGE_POSITION_FIELD_NUMBER: _ClassVar[int]
    ALGORITHM_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    SUMMARIZER_FIELD_NUMBER: _ClassVar[int]
    FACT_COUNT_FIELD_NUMBER: _ClassVar[int]
    ENTITY_COUNT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    scope_id: str
    change_position: int
    algorithm: str
    seed: int
    summarizer: str
    fact_count: int
    entity_count: int
    created_at: _timestamp_pb2.Timestamp
    def __init__(self, run_id: _Optional[str] = ..., scope_id: _Optional[str] = ..., change_position: _Optional[int] = ..., algorithm: _Optional[str] = ..., seed: _Optional[int] = ..., summarizer: _Optional[str] = ..., fact_count: _Optional[int] = ..., entity_count: _Optional[int] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Community(_message.Message):
    __slots__ = ("community_id", "scope_id", "label", "summary", "entities", "authoritative", "run", "fact_count", "score")
    COMMUNITY_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    ENTITIES_FIELD_NUMBER: _ClassVar[int]
    AUTHORITATIVE_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    FACT_COUNT_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    community_id: str
    scope_id: str
    label: str
    summary: str
    entities: _containers.RepeatedScalarFieldContainer[str]
    authoritative: bool
    run: DerivationRun
    fact_count: int
    score: float
    def __init__(self, community_id: _Optional[str] = ..., scope_id: _Optional[str] = ..., label: _Optional[str] = ..., summary: _Optional[str] = ..., entities: _Optional[_Iterable[str]] = ..., authoritative: _Optional[bool] = ..., run: _Optional[_Union[DerivationRun, _Mapping]] = ..., fact_count: _Optional[int] = ..., score: _Optional[float] = ...) -> None: ...

class PendingProposal(_message.Message):
    __slots__ = ("fact_key", "version_id", "proposer_principal_id", "subject", "predicate", "object", "evidence", "context", "proposed_at", "conflicting_fact_keys", "known_fact_key", "branch", "code_path", "source_id", "locator", "source_uri", "source_observed_at", "repository")
    FACT_KEY_FIELD_NUMBER: _ClassVar[int]
    VERSION_ID_FIELD_NUMBER: _ClassVar[int]
    PROPOSER_PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    PREDICATE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    PROPOSED_AT_FIELD_NUMBER: _ClassVar[int]
    CONFLICTING_FACT_KEYS_FIELD_NUMBER: _ClassVar[int]
    KNOWN_FACT_KEY_FIELD_NUMBER: _ClassVar[int]
    BRANCH_FIELD_NUMBER: _ClassVar[int]
    CODE_PATH_FIELD_NUMBER: _ClassVar[int]
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    LOCATOR_FIELD_NUMBER: _ClassVar[int]
    SOURCE_URI_FIELD_NUMBER: _ClassVar[int]
    SOURCE_OBSERVED_AT_FIELD_NUMBER: _ClassVar[int]
    REPOSITORY_FIELD_NUMBER: _ClassVar[int]
    fact_key: str
    version_id: str
    proposer_principal_id: str
    subject: str
    predicate: str
    object: str
    evidence: _containers.RepeatedScalarFieldContainer[str]
    context: TaskContext
    proposed_at: _timestamp_pb2.Timestamp
    conflicting_fact_keys: _containers.RepeatedScalarFieldContainer[str]
    known_fact_key: str
    branch: str
    code_path: str
    source_id: str
    locator: str
    source_uri: str
    source_observed_at: _timestamp_pb2.Timestamp
    repository: str
    def __init__(self, fact_key: _Optional[str] = ..., version_id: _Optional[str] = ..., proposer_principal_id: _Optional[str] = ..., subject: _Optional[str] = ..., predicate: _Optional[str] = ..., object: _Optional[str] = ..., evidence: _Optional[_Iterable[str]] = ..., context: _Optional[_Union[TaskContext, _Mapping]] = ..., proposed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., conflicting_fact_keys: _Optional[_Iterable[str]] = ..., known_fact_key: _Optional[str] = ..., branch: _Optional[str] = ..., code_path: _Optional[str] = ..., source_id: _Optional[str] = ..., locator: _Optional[str] = ..., source_uri: _Optional[str] = ..., source_observed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., repository: _Optional[str] = ...) -> None: ...

class ConflictedAttempt(_message.Message):
    __slots__ = ("attempt_id", "proposer_principal_id", "subject", "predicate", "object", "contradicted_fact_keys", "context", "attempted_at", "branch", "code_path")
    ATTEMPT_ID_FIELD_NUMBER: _ClassVar[int]
    PROPOSER_PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    PREDICATE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    CONTRADICTED_FACT_KEYS_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTED_AT_FIELD_NUMBER: _ClassVar[int]
    BRANCH_FIELD_NUMBER: _ClassVar[int]
    CODE_PATH_FIELD_NUMBER: _ClassVar[int]
    attempt_id: str
    proposer_principal_id: str
    subject: str
    predicate: str
    object: str
    contradicted_fact_keys: _containers.RepeatedScalarFieldContainer[str]
    context: TaskContext
    attempted_at: _timestamp_pb2.Timestamp
    branch: str
    code_path: str
    def __init__(self, attempt_id: _Optional[str] = ..., proposer_principal_id: _Optional[str] = ..., subject: _Optional[str] = ..., predicate: _Optional[str] = ..., object: _Optional[str] = ..., contradicted_fact_keys: _Optional[_Iterable[str]] = ..., context: _Optional[_Union[TaskContext, _Mapping]] = ..., attempted_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., branch: _Optional[str] = ..., code_path: _Optional[str] = ...) -> None: ...
