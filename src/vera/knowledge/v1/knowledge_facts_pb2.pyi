import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from vera.knowledge.v1 import knowledge_resources_pb2 as _knowledge_resources_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RetractionStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RETRACTION_STATUS_UNSPECIFIED: _ClassVar[RetractionStatus]
    RETRACTION_STATUS_RETRACTED: _ClassVar[RetractionStatus]
    RETRACTION_STATUS_ALREADY_RETRACTED: _ClassVar[RetractionStatus]

class FeedbackAttribution(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FEEDBACK_ATTRIBUTION_UNSPECIFIED: _ClassVar[FeedbackAttribution]
    FEEDBACK_ATTRIBUTION_RESULT: _ClassVar[FeedbackAttribution]
    FEEDBACK_ATTRIBUTION_PACK: _ClassVar[FeedbackAttribution]
    FEEDBACK_ATTRIBUTION_UNATTRIBUTED: _ClassVar[FeedbackAttribution]
RETRACTION_STATUS_UNSPECIFIED: RetractionStatus
RETRACTION_STATUS_RETRACTED: RetractionStatus
RETRACTION_STATUS_ALREADY_RETRACTED: RetractionStatus
FEEDBACK_ATTRIBUTION_UNSPECIFIED: FeedbackAttribution
FEEDBACK_ATTRIBUTION_RESULT: FeedbackAttribution
FEEDBACK_ATTRIBUTION_PACK: FeedbackAttribution
FEEDBACK_ATTRIBUTION_UNATTRIBUTED: FeedbackAttribution

class SourceInput(_message.Message):
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

class EntityInput(_message.Message):
    __slots__ = ("name", "aliases", "kind")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ALIASES_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    name: str
    aliases: _containers.RepeatedScalarFieldContainer[str]
    kind: str
    def __init__(self, name: _Optional[str] = ..., aliases: _Optional[_Iterable[str]] = ..., kind: _Optional[str] = ...) -> None: ...

class FactInput(_message.Message):
    __slots__ = ("subject", "predicate", "object", "source_id", "evidence", "locator", "valid_from", "valid_to", "trust_tier", "authority", "repository", "branch", "code_path", "document_type")
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    PREDICATE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    LOCATOR_FIELD_NUMBER: _ClassVar[int]
    VALID_FROM_FIELD_NUMBER: _ClassVar[int]
    VALID_TO_FIELD_NUMBER: _ClassVar[int]
    TRUST_TIER_FIELD_NUMBER: _ClassVar[int]
    AUTHORITY_FIELD_NUMBER: _ClassVar[int]
    REPOSITORY_FIELD_NUMBER: _ClassVar[int]
    BRANCH_FIELD_NUMBER: _ClassVar[int]
    CODE_PATH_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    subject: str
    predicate: str
    object: str
    source_id: str
    evidence: str
    locator: str
    valid_from: _timestamp_pb2.Timestamp
    valid_to: _timestamp_pb2.Timestamp
    trust_tier: int
    authority: float
    repository: str
    branch: str
    code_path: str
    document_type: str
    def __init__(self, subject: _Optional[str] = ..., predicate: _Optional[str] = ..., object: _Optional[str] = ..., source_id: _Optional[str] = ..., evidence: _Optional[str] = ..., locator: _Optional[str] = ..., valid_from: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., valid_to: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., trust_tier: _Optional[int] = ..., authority: _Optional[float] = ..., repository: _Optional[str] = ..., branch: _Optional[str] = ..., code_path: _Optional[str] = ..., document_type: _Optional[str] = ...) -> None: ...

class IngestCounts(_message.Message):
    __slots__ = ("created", "deduplicated")
    CREATED_FIELD_NUMBER: _ClassVar[int]
    DEDUPLICATED_FIELD_NUMBER: _ClassVar[int]
    created: int
    deduplicated: int
    def __init__(self, created: _Optional[int] = ..., deduplicated: _Optional[int] = ...) -> None: ...

class IngestKnowledgeRequest(_message.Message):
    __slots__ = ("principal_id", "scope_id", "sources", "entities", "facts", "validate_only", "corrected_fact_keys")
    PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    ENTITIES_FIELD_NUMBER: _ClassVar[int]
    FACTS_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    CORRECTED_FACT_KEYS_FIELD_NUMBER: _ClassVar[int]
    principal_id: str
    scope_id: str
    sources: _containers.RepeatedCompositeFieldContainer[SourceInput]
    entities: _containers.RepeatedCompositeFieldContainer[EntityInput]
    facts: _containers.RepeatedCompositeFieldContainer[FactInput]
    validate_only: bool
    corrected_fact_keys: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, principal_id: _Optional[str] = ..., scope_id: _Optional[str] = ..., sources: _Optional[_Iterable[_Union[SourceInput, _Mapping]]] = ..., entities: _Optional[_Iterable[_Union[EntityInput, _Mapping]]] = ..., facts: _Optional[_Iterable[_Union[FactInput, _Mapping]]] = ..., validate_only: _Optional[bool] = ..., corrected_fact_keys: _Optional[_Iterable[str]] = ...) -> None: ...

class IngestKnowledgeResponse(_message.Message):
    __slots__ = ("sources", "entities", "facts", "change_position", "warnings", "fact_keys")
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    ENTITIES_FIELD_NUMBER: _ClassVar[int]
    FACTS_FIELD_NUMBER: _ClassVar[int]
    CHANGE_POSITION_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    FACT_KEYS_FIELD_NUMBER: _ClassVar[int]
    sources: IngestCounts
    entities: IngestCounts
    facts: IngestCounts
    change_position: int
    warnings: _containers.RepeatedCompositeFieldContainer[IngestWarning]
    fact_keys: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, sources: _Optional[_Union[IngestCounts, _Mapping]] = ..., entities: _Optional[_Union[IngestCounts, _Mapping]] = ..., facts: _Optional[_Union[IngestCounts, _Mapping]] = ..., change_position: _Optional[int] = ..., warnings: _Optional[_Iterable[_Union[IngestWarning, _Mapping]]] = ..., fact_keys: _Optional[_Iterable[str]] = ...) -> None: ...

class IngestWarning(_message.Message):
    __slots__ = ("field", "reason", "codepoint")
    FIELD_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    CODEPOINT_FIELD_NUMBER: _ClassVar[int]
    field: str
    reason: str
    codepoint: str
    def __init__(self, field: _Optional[str] = ..., reason: _Optional[str] = ..., codepoint: _Optional[str] = ...) -> None: ...

class BatchGetFactsRequest(_message.Message):
    __slots__ = ("scope_ids", "fact_keys", "as_of", "known_as_of")
    SCOPE_IDS_FIELD_NUMBER: _ClassVar[int]
    FACT_KEYS_FIELD_NUMBER: _ClassVar[int]
    AS_OF_FIELD_NUMBER: _ClassVar[int]
    KNOWN_AS_OF_FIELD_NUMBER: _ClassVar[int]
    scope_ids: _containers.RepeatedScalarFieldContainer[str]
    fact_keys: _containers.RepeatedScalarFieldContainer[str]
    as_of: _timestamp_pb2.Timestamp
    known_as_of: _timestamp_pb2.Timestamp
    def __init__(self, scope_ids: _Optional[_Iterable[str]] = ..., fact_keys: _Optional[_Iterable[str]] = ..., as_of: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., known_as_of: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class BatchGetFactsResponse(_message.Message):
    __slots__ = ("facts",)
    FACTS_FIELD_NUMBER: _ClassVar[int]
    facts: _containers.RepeatedCompositeFieldContainer[_knowledge_resources_pb2.Fact]
    def __init__(self, facts: _Optional[_Iterable[_Union[_knowledge_resources_pb2.Fact, _Mapping]]] = ...) -> None: ...

class ExplainFactRequest(_message.Message):
    __slots__ = ("scope_ids", "fact_key", "as_of", "known_as_of")
    SCOPE_IDS_FIELD_NUMBER: _ClassVar[int]
    FACT_KEY_FIELD_NUMBER: _ClassVar[int]
    AS_OF_FIELD_NUMBER: _ClassVar[int]
    KNOWN_AS_OF_FIELD_NUMBER: _ClassVar[int]
    scope_ids: _containers.RepeatedScalarFieldContainer[str]
    fact_key: str
    as_of: _timestamp_pb2.Timestamp
    known_as_of: _timestamp_pb2.Timestamp
    def __init__(self, scope_ids: _Optional[_Iterable[str]] = ..., fact_key: _Optional[str] = ..., as_of: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., known_as_of: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ExplainFactResponse(_message.Message):
    __slots__ = ("fact", "assertions")
    FACT_FIELD_NUMBER: _ClassVar[int]
    ASSERTIONS_FIELD_NUMBER: _ClassVar[int]
    fact: _knowledge_resources_pb2.Fact
    assertions: _containers.RepeatedCompositeFieldContainer[_knowledge_resources_pb2.Assertion]
    def __init__(self, fact: _Optional[_Union[_knowledge_resources_pb2.Fact, _Mapping]] = ..., assertions: _Optional[_Iterable[_Union[_knowledge_resources_pb2.Assertion, _Mapping]]] = ...) -> None: ...

class ProposeFactRequest(_message.Message):
    __slots__ = ("principal_id", "personal_scope_id", "readable_scope_ids", "subject", "predicate", "object", "evidence_text", "context", "target_scope_id", "branch", "code_path")
    PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    PERSONAL_SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    READABLE_SCOPE_IDS_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    PREDICATE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_TEXT_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    TARGET_SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    BRANCH_FIELD_NUMBER: _ClassVar[int]
    CODE_PATH_FIELD_NUMBER: _ClassVar[int]
    principal_id: str
    personal_scope_id: str
    readable_scope_ids: _containers.RepeatedScalarFieldContainer[str]
    subject: str
    predicate: str
    object: str
    evidence_text: str
    context: _knowledge_resources_pb2.TaskContext
    target_scope_id: str
    branch: str
    code_path: str
    def __init__(self, principal_id: _Optional[str] = ..., personal_scope_id: _Optional[str] = ..., readable_scope_ids: _Optional[_Iterable[str]] = ..., subject: _Optional[str] = ..., predicate: _Optional[str] = ..., object: _Optional[str] = ..., evidence_text: _Optional[str] = ..., context: _Optional[_Union[_knowledge_resources_pb2.TaskContext, _Mapping]] = ..., target_scope_id: _Optional[str] = ..., branch: _Optional[str] = ..., code_path: _Optional[str] = ...) -> None: ...

class ProposeFactResponse(_message.Message):
    __slots__ = ("attempt_id", "outcome", "fact", "reason", "conflicting_fact_keys")
    ATTEMPT_ID_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    FACT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    CONFLICTING_FACT_KEYS_FIELD_NUMBER: _ClassVar[int]
    attempt_id: str
    outcome: _knowledge_resources_pb2.ProposalOutcome
    fact: _knowledge_resources_pb2.Fact
    reason: str
    conflicting_fact_keys: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, attempt_id: _Optional[str] = ..., outcome: _Optional[_Union[_knowledge_resources_pb2.ProposalOutcome, str]] = ..., fact: _Optional[_Union[_knowledge_resources_pb2.Fact, _Mapping]] = ..., reason: _Optional[str] = ..., conflicting_fact_keys: _Optional[_Iterable[str]] = ...) -> None: ...

class RetractProposalRequest(_message.Message):
    __slots__ = ("principal_id", "personal_scope_id", "fact_key")
    PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    PERSONAL_SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    FACT_KEY_FIELD_NUMBER: _ClassVar[int]
    principal_id: str
    personal_scope_id: str
    fact_key: str
    def __init__(self, principal_id: _Optional[str] = ..., personal_scope_id: _Optional[str] = ..., fact_key: _Optional[str] = ...) -> None: ...

class RetractProposalResponse(_message.Message):
    __slots__ = ("status", "fact")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    FACT_FIELD_NUMBER: _ClassVar[int]
    status: RetractionStatus
    fact: _knowledge_resources_pb2.Fact
    def __init__(self, status: _Optional[_Union[RetractionStatus, str]] = ..., fact: _Optional[_Union[_knowledge_resources_pb2.Fact, _Mapping]] = ...) -> None: ...

class GetProposalReportRequest(_message.Message):
    __slots__ = ("principal_id", "context", "page_size", "page_token")
    PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    principal_id: str
    context: _knowledge_resources_pb2.TaskContext
    page_size: int
    page_token: str
    def __init__(self, principal_id: _Optional[str] = ..., context: _Optional[_Union[_knowledge_resources_pb2.TaskContext, _Mapping]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class GetProposalReportResponse(_message.Message):
    __slots__ = ("attempts", "next_page_token", "outcome_counts", "state_counts", "total_attempts")
    class OutcomeCountsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class StateCountsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_COUNTS_FIELD_NUMBER: _ClassVar[int]
    STATE_COUNTS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    attempts: _containers.RepeatedCompositeFieldContainer[_knowledge_resources_pb2.ProposalAttempt]
    next_page_token: str
    outcome_counts: _containers.ScalarMap[str, int]
    state_counts: _containers.ScalarMap[str, int]
    total_attempts: int
    def __init__(self, attempts: _Optional[_Iterable[_Union[_knowledge_resources_pb2.ProposalAttempt, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., outcome_counts: _Optional[_Mapping[str, int]] = ..., state_counts: _Optional[_Mapping[str, int]] = ..., total_attempts: _Optional[int] = ...) -> None: ...

class GetProposalPolicyRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetProposalPolicyResponse(_message.Message):
    __slots__ = ("allowed_predicates", "single_valued_predicates", "ontology_version")
    ALLOWED_PREDICATES_FIELD_NUMBER: _ClassVar[int]
    SINGLE_VALUED_PREDICATES_FIELD_NUMBER: _ClassVar[int]
    ONTOLOGY_VERSION_FIELD_NUMBER: _ClassVar[int]
    allowed_predicates: _containers.RepeatedScalarFieldContainer[str]
    single_valued_predicates: _containers.RepeatedScalarFieldContainer[str]
    ontology_version: str
    def __init__(self, allowed_predicates: _Optional[_Iterable[str]] = ..., single_valued_predicates: _Optional[_Iterable[str]] = ..., ontology_version: _Optional[str] = ...) -> None: ...

class RecordFeedbackRequest(_message.Message):
    __slots__ = ("principal_id", "personal_scope_id", "pack_id", "result_ref", "signal", "query", "rank", "signal_vector", "fact_key", "attribution", "pack_scope_id")
    class SignalVectorEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    PERSONAL_SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    PACK_ID_FIELD_NUMBER: _ClassVar[int]
    RESULT_REF_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_VECTOR_FIELD_NUMBER: _ClassVar[int]
    FACT_KEY_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTION_FIELD_NUMBER: _ClassVar[int]
    PACK_SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    principal_id: str
    personal_scope_id: str
    pack_id: str
    result_ref: str
    signal: str
    query: str
    rank: int
    signal_vector: _containers.ScalarMap[str, float]
    fact_key: str
    attribution: FeedbackAttribution
    pack_scope_id: str
    def __init__(self, principal_id: _Optional[str] = ..., personal_scope_id: _Optional[str] = ..., pack_id: _Optional[str] = ..., result_ref: _Optional[str] = ..., signal: _Optional[str] = ..., query: _Optional[str] = ..., rank: _Optional[int] = ..., signal_vector: _Optional[_Mapping[str, float]] = ..., fact_key: _Optional[str] = ..., attribution: _Optional[_Union[FeedbackAttribution, str]] = ..., pack_scope_id: _Optional[str] = ...) -> None: ...

class RecordFeedbackResponse(_message.Message):
    __slots__ = ("feedback_id", "signal", "created", "recorded_at")
    FEEDBACK_ID_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    RECORDED_AT_FIELD_NUMBER: _ClassVar[int]
    feedback_id: str
    signal: str
    created: bool
    recorded_at: _timestamp_pb2.Timestamp
    def __init__(self, feedback_id: _Optional[str] = ..., signal: _Optional[str] = ..., created: _Optional[bool] = ..., recorded_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListRankingFeedbackRequest(_message.Message):
    __slots__ = ("pack_scope_id", "recorded_after", "page_size", "page_token", "max_rows_per_principal")
    PACK_SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    RECORDED_AFTER_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    MAX_ROWS_PER_PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    pack_scope_id: str
    recorded_after: _timestamp_pb2.Timestamp
    page_size: int
    page_token: str
    max_rows_per_principal: int
    def __init__(self, pack_scope_id: _Optional[str] = ..., recorded_after: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., max_rows_per_principal: _Optional[int] = ...) -> None: ...

class RankingFeedback(_message.Message):
    __slots__ = ("feedback_id", "pack_id", "query_digest", "rank", "signal", "signal_vector", "recorded_at", "query", "fact_key", "pack_scope_id")
    class SignalVectorEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    FEEDBACK_ID_FIELD_NUMBER: _ClassVar[int]
    PACK_ID_FIELD_NUMBER: _ClassVar[int]
    QUERY_DIGEST_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_VECTOR_FIELD_NUMBER: _ClassVar[int]
    RECORDED_AT_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    FACT_KEY_FIELD_NUMBER: _ClassVar[int]
    PACK_SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    feedback_id: str
    pack_id: str
    query_digest: str
    rank: int
    signal: str
    signal_vector: _containers.ScalarMap[str, float]
    recorded_at: _timestamp_pb2.Timestamp
    query: str
    fact_key: str
    pack_scope_id: str
    def __init__(self, feedback_id: _Optional[str] = ..., pack_id: _Optional[str] = ..., query_digest: _Optional[str] = ..., rank: _Optional[int] = ..., signal: _Optional[str] = ..., signal_vector: _Optional[_Mapping[str, float]] = ..., recorded_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., query: _Optional[str] = ..., fact_key: _Optional[str] = ..., pack_scope_id: _Optional[str] = ...) -> None: ...

class ListRankingFeedbackResponse(_message.Message):
    __slots__ = ("feedback", "next_page_token")
    FEEDBACK_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    feedback: _containers.RepeatedCompositeFieldContainer[RankingFeedback]
    next_page_token: str
    def __init__(self, feedback: _Optional[_Iterable[_Union[RankingFeedback, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListChangesRequest(_message.Message):
    __slots__ = ("after_position", "page_size", "scope_ids", "max_wait")
    AFTER_POSITION_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    SCOPE_IDS_FIELD_NUMBER: _ClassVar[int]
    MAX_WAIT_FIELD_NUMBER: _ClassVar[int]
    after_position: int
    page_size: int
    scope_ids: _containers.RepeatedScalarFieldContainer[str]
    max_wait: _duration_pb2.Duration
    def __init__(self, after_position: _Optional[int] = ..., page_size: _Optional[int] = ..., scope_ids: _Optional[_Iterable[str]] = ..., max_wait: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class ListChangesResponse(_message.Message):
    __slots__ = ("changes", "head_position")
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    HEAD_POSITION_FIELD_NUMBER: _ClassVar[int]
    changes: _containers.RepeatedCompositeFieldContainer[_knowledge_resources_pb2.Change]
    head_position: int
    def __init__(self, changes: _Optional[_Iterable[_Union[_knowledge_resources_pb2.Change, _Mapping]]] = ..., head_position: _Optional[int] = ...) -> None: ...

class ProposeFactsRequest(_message.Message):
    __slots__ = ("principal_id", "personal_scope_id", "target_scope_id", "sources", "facts")
    PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    PERSONAL_SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    TARGET_SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    FACTS_FIELD_NUMBER: _ClassVar[int]
    principal_id: str
    personal_scope_id: str
    target_scope_id: str
    sources: _containers.RepeatedCompositeFieldContainer[SourceInput]
    facts: _containers.RepeatedCompositeFieldContainer[FactInput]
    def __init__(self, principal_id: _Optional[str] = ..., personal_scope_id: _Optional[str] = ..., target_scope_id: _Optional[str] = ..., sources: _Optional[_Iterable[_Union[SourceInput, _Mapping]]] = ..., facts: _Optional[_Iterable[_Union[FactInput, _Mapping]]] = ...) -> None: ...

class ProposeFactsResponse(_message.Message):
    __slots__ = ("fact_keys", "created", "deduplicated", "unknown_predicates", "change_position")
    FACT_KEYS_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    DEDUPLICATED_FIELD_NUMBER: _ClassVar[int]
    UNKNOWN_PREDICATES_FIELD_NUMBER: _ClassVar[int]
    CHANGE_POSITION_FIELD_NUMBER: _ClassVar[int]
    fact_keys: _containers.RepeatedScalarFieldContainer[str]
    created: int
    deduplicated: int
    unknown_predicates: _containers.RepeatedScalarFieldContainer[str]
    change_position: int
    def __init__(self, fact_keys: _Optional[_Iterable[str]] = ..., created: _Optional[int] = ..., deduplicated: _Optional[int] = ..., unknown_predicates: _Optional[_Iterable[str]] = ..., change_position: _Optional[int] = ...) -> None: ...
