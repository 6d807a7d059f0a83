import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from vera.knowledge.v1 import knowledge_facts_pb2 as _knowledge_facts_pb2
from vera.knowledge.v1 import knowledge_resources_pb2 as _knowledge_resources_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ConflictFilter(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONFLICT_FILTER_UNSPECIFIED: _ClassVar[ConflictFilter]
    CONFLICT_FILTER_INCLUDE: _ClassVar[ConflictFilter]
    CONFLICT_FILTER_EXCLUDE: _ClassVar[ConflictFilter]
    CONFLICT_FILTER_ONLY: _ClassVar[ConflictFilter]
CONFLICT_FILTER_UNSPECIFIED: ConflictFilter
CONFLICT_FILTER_INCLUDE: ConflictFilter
CONFLICT_FILTER_EXCLUDE: ConflictFilter
CONFLICT_FILTER_ONLY: ConflictFilter

class CorrectFactRequest(_message.Message):
    __slots__ = ("principal_id", "scope_id", "fact_key", "replacement", "reason")
    PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    FACT_KEY_FIELD_NUMBER: _ClassVar[int]
    REPLACEMENT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    principal_id: str
    scope_id: str
    fact_key: str
    replacement: _knowledge_facts_pb2.FactInput
    reason: str
    def __init__(self, principal_id: _Optional[str] = ..., scope_id: _Optional[str] = ..., fact_key: _Optional[str] = ..., replacement: _Optional[_Union[_knowledge_facts_pb2.FactInput, _Mapping]] = ..., reason: _Optional[str] = ...) -> None: ...

class CorrectFactResponse(_message.Message):
    __slots__ = ("corrected", "replacement", "change_position", "created")
    CORRECTED_FIELD_NUMBER: _ClassVar[int]
    REPLACEMENT_FIELD_NUMBER: _ClassVar[int]
    CHANGE_POSITION_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    corrected: _knowledge_resources_pb2.Fact
    replacement: _knowledge_resources_pb2.Fact
    change_position: int
    created: bool
    def __init__(self, corrected: _Optional[_Union[_knowledge_resources_pb2.Fact, _Mapping]] = ..., replacement: _Optional[_Union[_knowledge_resources_pb2.Fact, _Mapping]] = ..., change_position: _Optional[int] = ..., created: _Optional[bool] = ...) -> None: ...

class GetFactRequest(_message.Message):
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

class GetFactResponse(_message.Message):
    __slots__ = ("fact", "versions", "empty_reason")
    FACT_FIELD_NUMBER: _ClassVar[int]
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    EMPTY_REASON_FIELD_NUMBER: _ClassVar[int]
    fact: _knowledge_resources_pb2.Fact
    versions: _containers.RepeatedCompositeFieldContainer[_knowledge_resources_pb2.FactVersion]
    empty_reason: str
    def __init__(self, fact: _Optional[_Union[_knowledge_resources_pb2.Fact, _Mapping]] = ..., versions: _Optional[_Iterable[_Union[_knowledge_resources_pb2.FactVersion, _Mapping]]] = ..., empty_reason: _Optional[str] = ...) -> None: ...

class GetEntityRequest(_message.Message):
    __slots__ = ("scope_ids", "name", "entity_id", "as_of", "known_as_of", "page_size", "conflict_filter")
    SCOPE_IDS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ENTITY_ID_FIELD_NUMBER: _ClassVar[int]
    AS_OF_FIELD_NUMBER: _ClassVar[int]
    KNOWN_AS_OF_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    CONFLICT_FILTER_FIELD_NUMBER: _ClassVar[int]
    scope_ids: _containers.RepeatedScalarFieldContainer[str]
    name: str
    entity_id: str
    as_of: _timestamp_pb2.Timestamp
    known_as_of: _timestamp_pb2.Timestamp
    page_size: int
    conflict_filter: ConflictFilter
    def __init__(self, scope_ids: _Optional[_Iterable[str]] = ..., name: _Optional[str] = ..., entity_id: _Optional[str] = ..., as_of: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., known_as_of: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., page_size: _Optional[int] = ..., conflict_filter: _Optional[_Union[ConflictFilter, str]] = ...) -> None: ...

class GetEntityResponse(_message.Message):
    __slots__ = ("entity", "facts", "total_facts", "total_facts_is_lower_bound")
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    FACTS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FACTS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FACTS_IS_LOWER_BOUND_FIELD_NUMBER: _ClassVar[int]
    entity: _knowledge_resources_pb2.Entity
    facts: _containers.RepeatedCompositeFieldContainer[_knowledge_resources_pb2.Fact]
    total_facts: int
    total_facts_is_lower_bound: bool
    def __init__(self, entity: _Optional[_Union[_knowledge_resources_pb2.Entity, _Mapping]] = ..., facts: _Optional[_Iterable[_Union[_knowledge_resources_pb2.Fact, _Mapping]]] = ..., total_facts: _Optional[int] = ..., total_facts_is_lower_bound: _Optional[bool] = ...) -> None: ...

class GetSourceRequest(_message.Message):
    __slots__ = ("scope_ids", "source_id", "scope_id", "known_as_of", "as_of")
    SCOPE_IDS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    KNOWN_AS_OF_FIELD_NUMBER: _ClassVar[int]
    AS_OF_FIELD_NUMBER: _ClassVar[int]
    scope_ids: _containers.RepeatedScalarFieldContainer[str]
    source_id: str
    scope_id: str
    known_as_of: _timestamp_pb2.Timestamp
    as_of: _timestamp_pb2.Timestamp
    def __init__(self, scope_ids: _Optional[_Iterable[str]] = ..., source_id: _Optional[str] = ..., scope_id: _Optional[str] = ..., known_as_of: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., as_of: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class GetSourceResponse(_message.Message):
    __slots__ = ("source", "scope_id", "versions", "freshness", "cited_by_facts")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    FRESHNESS_FIELD_NUMBER: _ClassVar[int]
    CITED_BY_FACTS_FIELD_NUMBER: _ClassVar[int]
    source: _knowledge_resources_pb2.Source
    scope_id: str
    versions: _containers.RepeatedCompositeFieldContainer[_knowledge_resources_pb2.SourceVersion]
    freshness: _knowledge_resources_pb2.SourceFreshness
    cited_by_facts: int
    def __init__(self, source: _Optional[_Union[_knowledge_resources_pb2.Source, _Mapping]] = ..., scope_id: _Optional[str] = ..., versions: _Optional[_Iterable[_Union[_knowledge_resources_pb2.SourceVersion, _Mapping]]] = ..., freshness: _Optional[_Union[_knowledge_resources_pb2.SourceFreshness, _Mapping]] = ..., cited_by_facts: _Optional[int] = ...) -> None: ...

class ExploreGraphRequest(_message.Message):
    __slots__ = ("scope_ids", "name", "entity_id", "depth", "page_size", "as_of", "known_as_of", "conflict_filter")
    SCOPE_IDS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ENTITY_ID_FIELD_NUMBER: _ClassVar[int]
    DEPTH_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    AS_OF_FIELD_NUMBER: _ClassVar[int]
    KNOWN_AS_OF_FIELD_NUMBER: _ClassVar[int]
    CONFLICT_FILTER_FIELD_NUMBER: _ClassVar[int]
    scope_ids: _containers.RepeatedScalarFieldContainer[str]
    name: str
    entity_id: str
    depth: int
    page_size: int
    as_of: _timestamp_pb2.Timestamp
    known_as_of: _timestamp_pb2.Timestamp
    conflict_filter: ConflictFilter
    def __init__(self, scope_ids: _Optional[_Iterable[str]] = ..., name: _Optional[str] = ..., entity_id: _Optional[str] = ..., depth: _Optional[int] = ..., page_size: _Optional[int] = ..., as_of: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., known_as_of: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., conflict_filter: _Optional[_Union[ConflictFilter, str]] = ...) -> None: ...

class ExploreGraphResponse(_message.Message):
    __slots__ = ("entity", "edges", "nodes", "truncated")
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    EDGES_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    entity: _knowledge_resources_pb2.Entity
    edges: _containers.RepeatedCompositeFieldContainer[_knowledge_resources_pb2.GraphEdge]
    nodes: _containers.RepeatedScalarFieldContainer[str]
    truncated: bool
    def __init__(self, entity: _Optional[_Union[_knowledge_resources_pb2.Entity, _Mapping]] = ..., edges: _Optional[_Iterable[_Union[_knowledge_resources_pb2.GraphEdge, _Mapping]]] = ..., nodes: _Optional[_Iterable[str]] = ..., truncated: _Optional[bool] = ...) -> None: ...

class ListConflictsRequest(_message.Message):
    __slots__ = ("scope_ids", "page_size", "page_token", "as_of", "known_as_of")
    SCOPE_IDS_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    AS_OF_FIELD_NUMBER: _ClassVar[int]
    KNOWN_AS_OF_FIELD_NUMBER: _ClassVar[int]
    scope_ids: _containers.RepeatedScalarFieldContainer[str]
    page_size: int
    page_token: str
    as_of: _timestamp_pb2.Timestamp
    known_as_of: _timestamp_pb2.Timestamp
    def __init__(self, scope_ids: _Optional[_Iterable[str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., as_of: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., known_as_of: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListConflictsResponse(_message.Message):
    __slots__ = ("conflicts", "next_page_token", "total", "ontology_version", "total_is_lower_bound")
    CONFLICTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    ONTOLOGY_VERSION_FIELD_NUMBER: _ClassVar[int]
    TOTAL_IS_LOWER_BOUND_FIELD_NUMBER: _ClassVar[int]
    conflicts: _containers.RepeatedCompositeFieldContainer[_knowledge_resources_pb2.ConflictGroup]
    next_page_token: str
    total: int
    ontology_version: str
    total_is_lower_bound: bool
    def __init__(self, conflicts: _Optional[_Iterable[_Union[_knowledge_resources_pb2.ConflictGroup, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., total: _Optional[int] = ..., ontology_version: _Optional[str] = ..., total_is_lower_bound: _Optional[bool] = ...) -> None: ...

class ListScopeChangesRequest(_message.Message):
    __slots__ = ("scope_ids", "page_size", "page_token", "as_of", "known_as_of", "newest_first", "changes")
    SCOPE_IDS_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    AS_OF_FIELD_NUMBER: _ClassVar[int]
    KNOWN_AS_OF_FIELD_NUMBER: _ClassVar[int]
    NEWEST_FIRST_FIELD_NUMBER: _ClassVar[int]
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    scope_ids: _containers.RepeatedScalarFieldContainer[str]
    page_size: int
    page_token: str
    as_of: _timestamp_pb2.Timestamp
    known_as_of: _timestamp_pb2.Timestamp
    newest_first: bool
    changes: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, scope_ids: _Optional[_Iterable[str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., as_of: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., known_as_of: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., newest_first: _Optional[bool] = ..., changes: _Optional[_Iterable[str]] = ...) -> None: ...

class ListScopeChangesResponse(_message.Message):
    __slots__ = ("changes", "next_page_token", "has_more")
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    HAS_MORE_FIELD_NUMBER: _ClassVar[int]
    changes: _containers.RepeatedCompositeFieldContainer[_knowledge_resources_pb2.ScopeChange]
    next_page_token: str
    has_more: bool
    def __init__(self, changes: _Optional[_Iterable[_Union[_knowledge_resources_pb2.ScopeChange, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., has_more: _Optional[bool] = ...) -> None: ...

class DeriveCommunitiesRequest(_message.Message):
    __slots__ = ("scope_id",)
    SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    scope_id: str
    def __init__(self, scope_id: _Optional[str] = ...) -> None: ...

class DeriveCommunitiesResponse(_message.Message):
    __slots__ = ("run", "created", "community_count")
    RUN_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    COMMUNITY_COUNT_FIELD_NUMBER: _ClassVar[int]
    run: _knowledge_resources_pb2.DerivationRun
    created: bool
    community_count: int
    def __init__(self, run: _Optional[_Union[_knowledge_resources_pb2.DerivationRun, _Mapping]] = ..., created: _Optional[bool] = ..., community_count: _Optional[int] = ...) -> None: ...

class SearchCommunitiesRequest(_message.Message):
    __slots__ = ("scope_ids", "query", "page_size", "known_as_of", "as_of")
    SCOPE_IDS_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    KNOWN_AS_OF_FIELD_NUMBER: _ClassVar[int]
    AS_OF_FIELD_NUMBER: _ClassVar[int]
    scope_ids: _containers.RepeatedScalarFieldContainer[str]
    query: str
    page_size: int
    known_as_of: _timestamp_pb2.Timestamp
    as_of: _timestamp_pb2.Timestamp
    def __init__(self, scope_ids: _Optional[_Iterable[str]] = ..., query: _Optional[str] = ..., page_size: _Optional[int] = ..., known_as_of: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., as_of: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class SearchCommunitiesResponse(_message.Message):
    __slots__ = ("communities", "empty_reason")
    COMMUNITIES_FIELD_NUMBER: _ClassVar[int]
    EMPTY_REASON_FIELD_NUMBER: _ClassVar[int]
    communities: _containers.RepeatedCompositeFieldContainer[_knowledge_resources_pb2.Community]
    empty_reason: str
    def __init__(self, communities: _Optional[_Iterable[_Union[_knowledge_resources_pb2.Community, _Mapping]]] = ..., empty_reason: _Optional[str] = ...) -> None: ...

class GetCommunityLineageRequest(_message.Message):
    __slots__ = ("scope_ids", "community_id", "page_size", "page_token", "as_of", "known_as_of")
    SCOPE_IDS_FIELD_NUMBER: _ClassVar[int]
    COMMUNITY_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    AS_OF_FIELD_NUMBER: _ClassVar[int]
    KNOWN_AS_OF_FIELD_NUMBER: _ClassVar[int]
    scope_ids: _containers.RepeatedScalarFieldContainer[str]
    community_id: str
    page_size: int
    page_token: str
    as_of: _timestamp_pb2.Timestamp
    known_as_of: _timestamp_pb2.Timestamp
    def __init__(self, scope_ids: _Optional[_Iterable[str]] = ..., community_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., as_of: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., known_as_of: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class GetCommunityLineageResponse(_message.Message):
    __slots__ = ("community", "facts", "next_page_token", "total", "total_is_lower_bound")
    COMMUNITY_FIELD_NUMBER: _ClassVar[int]
    FACTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    TOTAL_IS_LOWER_BOUND_FIELD_NUMBER: _ClassVar[int]
    community: _knowledge_resources_pb2.Community
    facts: _containers.RepeatedCompositeFieldContainer[_knowledge_resources_pb2.Fact]
    next_page_token: str
    total: int
    total_is_lower_bound: bool
    def __init__(self, community: _Optional[_Union[_knowledge_resources_pb2.Community, _Mapping]] = ..., facts: _Optional[_Iterable[_Union[_knowledge_resources_pb2.Fact, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., total: _Optional[int] = ..., total_is_lower_bound: _Optional[bool] = ...) -> None: ...
