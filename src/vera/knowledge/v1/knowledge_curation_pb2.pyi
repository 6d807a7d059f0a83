import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from vera.knowledge.v1 import knowledge_facts_pb2 as _knowledge_facts_pb2
from vera.knowledge.v1 import knowledge_resources_pb2 as _knowledge_resources_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ListPendingProposalsRequest(_message.Message):
    __slots__ = ("scope_id", "page_size", "page_token")
    SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    scope_id: str
    page_size: int
    page_token: str
    def __init__(self, scope_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListPendingProposalsResponse(_message.Message):
    __slots__ = ("proposals", "next_page_token", "total", "total_is_lower_bound")
    PROPOSALS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    TOTAL_IS_LOWER_BOUND_FIELD_NUMBER: _ClassVar[int]
    proposals: _containers.RepeatedCompositeFieldContainer[_knowledge_resources_pb2.PendingProposal]
    next_page_token: str
    total: int
    total_is_lower_bound: bool
    def __init__(self, proposals: _Optional[_Iterable[_Union[_knowledge_resources_pb2.PendingProposal, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., total: _Optional[int] = ..., total_is_lower_bound: _Optional[bool] = ...) -> None: ...

class ListConflictedAttemptsRequest(_message.Message):
    __slots__ = ("scope_id", "page_size", "page_token")
    SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    scope_id: str
    page_size: int
    page_token: str
    def __init__(self, scope_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListConflictedAttemptsResponse(_message.Message):
    __slots__ = ("attempts", "next_page_token", "total", "total_is_lower_bound")
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    TOTAL_IS_LOWER_BOUND_FIELD_NUMBER: _ClassVar[int]
    attempts: _containers.RepeatedCompositeFieldContainer[_knowledge_resources_pb2.ConflictedAttempt]
    next_page_token: str
    total: int
    total_is_lower_bound: bool
    def __init__(self, attempts: _Optional[_Iterable[_Union[_knowledge_resources_pb2.ConflictedAttempt, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., total: _Optional[int] = ..., total_is_lower_bound: _Optional[bool] = ...) -> None: ...

class VerifyProposalRequest(_message.Message):
    __slots__ = ("curator_principal_id", "scope_id", "fact_key", "trust_tier", "authority", "note")
    CURATOR_PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    FACT_KEY_FIELD_NUMBER: _ClassVar[int]
    TRUST_TIER_FIELD_NUMBER: _ClassVar[int]
    AUTHORITY_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    curator_principal_id: str
    scope_id: str
    fact_key: str
    trust_tier: int
    authority: float
    note: str
    def __init__(self, curator_principal_id: _Optional[str] = ..., scope_id: _Optional[str] = ..., fact_key: _Optional[str] = ..., trust_tier: _Optional[int] = ..., authority: _Optional[float] = ..., note: _Optional[str] = ...) -> None: ...

class CurationSettings(_message.Message):
    __slots__ = ("two_person_verification",)
    TWO_PERSON_VERIFICATION_FIELD_NUMBER: _ClassVar[int]
    two_person_verification: bool
    def __init__(self, two_person_verification: _Optional[bool] = ...) -> None: ...

class GetCurationSettingsRequest(_message.Message):
    __slots__ = ("scope_id",)
    SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    scope_id: str
    def __init__(self, scope_id: _Optional[str] = ...) -> None: ...

class GetCurationSettingsResponse(_message.Message):
    __slots__ = ("settings",)
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    settings: CurationSettings
    def __init__(self, settings: _Optional[_Union[CurationSettings, _Mapping]] = ...) -> None: ...

class SetCurationSettingsRequest(_message.Message):
    __slots__ = ("principal_id", "scope_id", "settings")
    PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    principal_id: str
    scope_id: str
    settings: CurationSettings
    def __init__(self, principal_id: _Optional[str] = ..., scope_id: _Optional[str] = ..., settings: _Optional[_Union[CurationSettings, _Mapping]] = ...) -> None: ...

class SetCurationSettingsResponse(_message.Message):
    __slots__ = ("settings",)
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    settings: CurationSettings
    def __init__(self, settings: _Optional[_Union[CurationSettings, _Mapping]] = ...) -> None: ...

class VerifyProposalResponse(_message.Message):
    __slots__ = ("fact", "proposal", "already_active", "change_position")
    FACT_FIELD_NUMBER: _ClassVar[int]
    PROPOSAL_FIELD_NUMBER: _ClassVar[int]
    ALREADY_ACTIVE_FIELD_NUMBER: _ClassVar[int]
    CHANGE_POSITION_FIELD_NUMBER: _ClassVar[int]
    fact: _knowledge_resources_pb2.Fact
    proposal: _knowledge_resources_pb2.Fact
    already_active: bool
    change_position: int
    def __init__(self, fact: _Optional[_Union[_knowledge_resources_pb2.Fact, _Mapping]] = ..., proposal: _Optional[_Union[_knowledge_resources_pb2.Fact, _Mapping]] = ..., already_active: _Optional[bool] = ..., change_position: _Optional[int] = ...) -> None: ...

class RejectProposalRequest(_message.Message):
    __slots__ = ("curator_principal_id", "scope_id", "fact_key", "reason")
    CURATOR_PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    FACT_KEY_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    curator_principal_id: str
    scope_id: str
    fact_key: str
    reason: str
    def __init__(self, curator_principal_id: _Optional[str] = ..., scope_id: _Optional[str] = ..., fact_key: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class RejectProposalResponse(_message.Message):
    __slots__ = ("proposal", "change_position")
    PROPOSAL_FIELD_NUMBER: _ClassVar[int]
    CHANGE_POSITION_FIELD_NUMBER: _ClassVar[int]
    proposal: _knowledge_resources_pb2.Fact
    change_position: int
    def __init__(self, proposal: _Optional[_Union[_knowledge_resources_pb2.Fact, _Mapping]] = ..., change_position: _Optional[int] = ...) -> None: ...

class RetractSourceRequest(_message.Message):
    __slots__ = ("curator_principal_id", "scope_id", "source_id", "reason", "validate_only")
    CURATOR_PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    curator_principal_id: str
    scope_id: str
    source_id: str
    reason: str
    validate_only: bool
    def __init__(self, curator_principal_id: _Optional[str] = ..., scope_id: _Optional[str] = ..., source_id: _Optional[str] = ..., reason: _Optional[str] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class RetractSourceResponse(_message.Message):
    __slots__ = ("status", "assertions_withdrawn", "retracted_fact_keys", "still_supported_fact_keys", "audit_event_id", "change_position")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ASSERTIONS_WITHDRAWN_FIELD_NUMBER: _ClassVar[int]
    RETRACTED_FACT_KEYS_FIELD_NUMBER: _ClassVar[int]
    STILL_SUPPORTED_FACT_KEYS_FIELD_NUMBER: _ClassVar[int]
    AUDIT_EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    CHANGE_POSITION_FIELD_NUMBER: _ClassVar[int]
    status: _knowledge_facts_pb2.RetractionStatus
    assertions_withdrawn: int
    retracted_fact_keys: _containers.RepeatedScalarFieldContainer[str]
    still_supported_fact_keys: _containers.RepeatedScalarFieldContainer[str]
    audit_event_id: str
    change_position: int
    def __init__(self, status: _Optional[_Union[_knowledge_facts_pb2.RetractionStatus, str]] = ..., assertions_withdrawn: _Optional[int] = ..., retracted_fact_keys: _Optional[_Iterable[str]] = ..., still_supported_fact_keys: _Optional[_Iterable[str]] = ..., audit_event_id: _Optional[str] = ..., change_position: _Optional[int] = ...) -> None: ...

class ListSourcesRequest(_message.Message):
    __slots__ = ("scope_id", "page_size", "page_token")
    SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    scope_id: str
    page_size: int
    page_token: str
    def __init__(self, scope_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class SourceSummary(_message.Message):
    __slots__ = ("source", "freshness", "cited_by_facts", "retracted_at")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    FRESHNESS_FIELD_NUMBER: _ClassVar[int]
    CITED_BY_FACTS_FIELD_NUMBER: _ClassVar[int]
    RETRACTED_AT_FIELD_NUMBER: _ClassVar[int]
    source: _knowledge_resources_pb2.Source
    freshness: _knowledge_resources_pb2.SourceFreshness
    cited_by_facts: int
    retracted_at: _timestamp_pb2.Timestamp
    def __init__(self, source: _Optional[_Union[_knowledge_resources_pb2.Source, _Mapping]] = ..., freshness: _Optional[_Union[_knowledge_resources_pb2.SourceFreshness, _Mapping]] = ..., cited_by_facts: _Optional[int] = ..., retracted_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListSourcesResponse(_message.Message):
    __slots__ = ("sources", "next_page_token", "total", "total_is_lower_bound")
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    TOTAL_IS_LOWER_BOUND_FIELD_NUMBER: _ClassVar[int]
    sources: _containers.RepeatedCompositeFieldContainer[SourceSummary]
    next_page_token: str
    total: int
    total_is_lower_bound: bool
    def __init__(self, sources: _Optional[_Iterable[_Union[SourceSummary, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., total: _Optional[int] = ..., total_is_lower_bound: _Optional[bool] = ...) -> None: ...

class ListCitedLinesRequest(_message.Message):
    __slots__ = ("scope_id", "source_id_prefix", "drifted_only", "page_size", "page_token")
    SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_ID_PREFIX_FIELD_NUMBER: _ClassVar[int]
    DRIFTED_ONLY_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    scope_id: str
    source_id_prefix: str
    drifted_only: bool
    page_size: int
    page_token: str
    def __init__(self, scope_id: _Optional[str] = ..., source_id_prefix: _Optional[str] = ..., drifted_only: _Optional[bool] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class CitedLines(_message.Message):
    __slots__ = ("fact_key", "source_id", "locator", "evidence", "subject", "predicate", "object", "drift_reason", "drift_commit", "drift_detected_at")
    FACT_KEY_FIELD_NUMBER: _ClassVar[int]
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    LOCATOR_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    PREDICATE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    DRIFT_REASON_FIELD_NUMBER: _ClassVar[int]
    DRIFT_COMMIT_FIELD_NUMBER: _ClassVar[int]
    DRIFT_DETECTED_AT_FIELD_NUMBER: _ClassVar[int]
    fact_key: str
    source_id: str
    locator: str
    evidence: str
    subject: str
    predicate: str
    object: str
    drift_reason: str
    drift_commit: str
    drift_detected_at: _timestamp_pb2.Timestamp
    def __init__(self, fact_key: _Optional[str] = ..., source_id: _Optional[str] = ..., locator: _Optional[str] = ..., evidence: _Optional[str] = ..., subject: _Optional[str] = ..., predicate: _Optional[str] = ..., object: _Optional[str] = ..., drift_reason: _Optional[str] = ..., drift_commit: _Optional[str] = ..., drift_detected_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListCitedLinesResponse(_message.Message):
    __slots__ = ("cited", "next_page_token")
    CITED_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    cited: _containers.RepeatedCompositeFieldContainer[CitedLines]
    next_page_token: str
    def __init__(self, cited: _Optional[_Iterable[_Union[CitedLines, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class CitationDrift(_message.Message):
    __slots__ = ("fact_key", "source_id", "reason")
    FACT_KEY_FIELD_NUMBER: _ClassVar[int]
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    fact_key: str
    source_id: str
    reason: str
    def __init__(self, fact_key: _Optional[str] = ..., source_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class RecordCitationDriftRequest(_message.Message):
    __slots__ = ("curator_principal_id", "scope_id", "commit", "drift")
    CURATOR_PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    COMMIT_FIELD_NUMBER: _ClassVar[int]
    DRIFT_FIELD_NUMBER: _ClassVar[int]
    curator_principal_id: str
    scope_id: str
    commit: str
    drift: _containers.RepeatedCompositeFieldContainer[CitationDrift]
    def __init__(self, curator_principal_id: _Optional[str] = ..., scope_id: _Optional[str] = ..., commit: _Optional[str] = ..., drift: _Optional[_Iterable[_Union[CitationDrift, _Mapping]]] = ...) -> None: ...

class RecordCitationDriftResponse(_message.Message):
    __slots__ = ("marked", "cleared")
    MARKED_FIELD_NUMBER: _ClassVar[int]
    CLEARED_FIELD_NUMBER: _ClassVar[int]
    marked: int
    cleared: int
    def __init__(self, marked: _Optional[int] = ..., cleared: _Optional[int] = ...) -> None: ...
