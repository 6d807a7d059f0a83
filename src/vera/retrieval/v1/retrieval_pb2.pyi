import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from vera.knowledge.v1 import knowledge_resources_pb2 as _knowledge_resources_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ConflictHandling(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONFLICT_HANDLING_UNSPECIFIED: _ClassVar[ConflictHandling]
    CONFLICT_HANDLING_INCLUDE: _ClassVar[ConflictHandling]
    CONFLICT_HANDLING_EXCLUDE: _ClassVar[ConflictHandling]
    CONFLICT_HANDLING_ONLY: _ClassVar[ConflictHandling]

class RetrievalMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RETRIEVAL_MODE_UNSPECIFIED: _ClassVar[RetrievalMode]
    RETRIEVAL_MODE_HYBRID: _ClassVar[RetrievalMode]
    RETRIEVAL_MODE_LEXICAL_ONLY: _ClassVar[RetrievalMode]

class RankFitOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RANK_FIT_OUTCOME_UNSPECIFIED: _ClassVar[RankFitOutcome]
    RANK_FIT_OUTCOME_ACTIVATED: _ClassVar[RankFitOutcome]
    RANK_FIT_OUTCOME_TOO_LITTLE_FEEDBACK: _ClassVar[RankFitOutcome]
    RANK_FIT_OUTCOME_ONE_SIDED_FEEDBACK: _ClassVar[RankFitOutcome]
    RANK_FIT_OUTCOME_NOT_BETTER: _ClassVar[RankFitOutcome]
    RANK_FIT_OUTCOME_WORSE_AT_TOP: _ClassVar[RankFitOutcome]
    RANK_FIT_OUTCOME_WORSE_AT_RECALL: _ClassVar[RankFitOutcome]

class RankNotServedReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RANK_NOT_SERVED_REASON_UNSPECIFIED: _ClassVar[RankNotServedReason]
    RANK_NOT_SERVED_REASON_FITTED_ON_OTHER_FEATURES: _ClassVar[RankNotServedReason]
CONFLICT_HANDLING_UNSPECIFIED: ConflictHandling
CONFLICT_HANDLING_INCLUDE: ConflictHandling
CONFLICT_HANDLING_EXCLUDE: ConflictHandling
CONFLICT_HANDLING_ONLY: ConflictHandling
RETRIEVAL_MODE_UNSPECIFIED: RetrievalMode
RETRIEVAL_MODE_HYBRID: RetrievalMode
RETRIEVAL_MODE_LEXICAL_ONLY: RetrievalMode
RANK_FIT_OUTCOME_UNSPECIFIED: RankFitOutcome
RANK_FIT_OUTCOME_ACTIVATED: RankFitOutcome
RANK_FIT_OUTCOME_TOO_LITTLE_FEEDBACK: RankFitOutcome
RANK_FIT_OUTCOME_ONE_SIDED_FEEDBACK: RankFitOutcome
RANK_FIT_OUTCOME_NOT_BETTER: RankFitOutcome
RANK_FIT_OUTCOME_WORSE_AT_TOP: RankFitOutcome
RANK_FIT_OUTCOME_WORSE_AT_RECALL: RankFitOutcome
RANK_NOT_SERVED_REASON_UNSPECIFIED: RankNotServedReason
RANK_NOT_SERVED_REASON_FITTED_ON_OTHER_FEATURES: RankNotServedReason

class RetrievalFilters(_message.Message):
    __slots__ = ("as_of", "known_as_of", "repository", "branch", "code_path", "document_type", "source_type", "include_predicates", "exclude_predicates", "min_authority", "max_trust_tier", "conflict_handling")
    AS_OF_FIELD_NUMBER: _ClassVar[int]
    KNOWN_AS_OF_FIELD_NUMBER: _ClassVar[int]
    REPOSITORY_FIELD_NUMBER: _ClassVar[int]
    BRANCH_FIELD_NUMBER: _ClassVar[int]
    CODE_PATH_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_PREDICATES_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_PREDICATES_FIELD_NUMBER: _ClassVar[int]
    MIN_AUTHORITY_FIELD_NUMBER: _ClassVar[int]
    MAX_TRUST_TIER_FIELD_NUMBER: _ClassVar[int]
    CONFLICT_HANDLING_FIELD_NUMBER: _ClassVar[int]
    as_of: _timestamp_pb2.Timestamp
    known_as_of: _timestamp_pb2.Timestamp
    repository: str
    branch: str
    code_path: str
    document_type: str
    source_type: str
    include_predicates: _containers.RepeatedScalarFieldContainer[str]
    exclude_predicates: _containers.RepeatedScalarFieldContainer[str]
    min_authority: float
    max_trust_tier: int
    conflict_handling: ConflictHandling
    def __init__(self, as_of: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., known_as_of: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., repository: _Optional[str] = ..., branch: _Optional[str] = ..., code_path: _Optional[str] = ..., document_type: _Optional[str] = ..., source_type: _Optional[str] = ..., include_predicates: _Optional[_Iterable[str]] = ..., exclude_predicates: _Optional[_Iterable[str]] = ..., min_authority: _Optional[float] = ..., max_trust_tier: _Optional[int] = ..., conflict_handling: _Optional[_Union[ConflictHandling, str]] = ...) -> None: ...

class RetrievedFact(_message.Message):
    __slots__ = ("fact", "score", "rank", "result_ref", "signals")
    class SignalsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    FACT_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    RESULT_REF_FIELD_NUMBER: _ClassVar[int]
    SIGNALS_FIELD_NUMBER: _ClassVar[int]
    fact: _knowledge_resources_pb2.Fact
    score: float
    rank: int
    result_ref: str
    signals: _containers.ScalarMap[str, float]
    def __init__(self, fact: _Optional[_Union[_knowledge_resources_pb2.Fact, _Mapping]] = ..., score: _Optional[float] = ..., rank: _Optional[int] = ..., result_ref: _Optional[str] = ..., signals: _Optional[_Mapping[str, float]] = ...) -> None: ...

class Conflict(_message.Message):
    __slots__ = ("subject", "predicate", "fact_keys")
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    PREDICATE_FIELD_NUMBER: _ClassVar[int]
    FACT_KEYS_FIELD_NUMBER: _ClassVar[int]
    subject: str
    predicate: str
    fact_keys: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, subject: _Optional[str] = ..., predicate: _Optional[str] = ..., fact_keys: _Optional[_Iterable[str]] = ...) -> None: ...

class FreshnessWarning(_message.Message):
    __slots__ = ("fact_key", "source_id", "reason", "observed_at")
    FACT_KEY_FIELD_NUMBER: _ClassVar[int]
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_AT_FIELD_NUMBER: _ClassVar[int]
    fact_key: str
    source_id: str
    reason: str
    observed_at: _timestamp_pb2.Timestamp
    def __init__(self, fact_key: _Optional[str] = ..., source_id: _Optional[str] = ..., reason: _Optional[str] = ..., observed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Omission(_message.Message):
    __slots__ = ("fact_key", "reason")
    FACT_KEY_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    fact_key: str
    reason: str
    def __init__(self, fact_key: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class SearchRequest(_message.Message):
    __slots__ = ("scope_ids", "query", "limit", "filters", "assembler_version")
    SCOPE_IDS_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    FILTERS_FIELD_NUMBER: _ClassVar[int]
    ASSEMBLER_VERSION_FIELD_NUMBER: _ClassVar[int]
    scope_ids: _containers.RepeatedScalarFieldContainer[str]
    query: str
    limit: int
    filters: RetrievalFilters
    assembler_version: str
    def __init__(self, scope_ids: _Optional[_Iterable[str]] = ..., query: _Optional[str] = ..., limit: _Optional[int] = ..., filters: _Optional[_Union[RetrievalFilters, _Mapping]] = ..., assembler_version: _Optional[str] = ...) -> None: ...

class SearchResponse(_message.Message):
    __slots__ = ("results", "conflicts", "freshness_warnings", "omitted", "empty_reason", "assembler_version", "retrieval_mode")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    CONFLICTS_FIELD_NUMBER: _ClassVar[int]
    FRESHNESS_WARNINGS_FIELD_NUMBER: _ClassVar[int]
    OMITTED_FIELD_NUMBER: _ClassVar[int]
    EMPTY_REASON_FIELD_NUMBER: _ClassVar[int]
    ASSEMBLER_VERSION_FIELD_NUMBER: _ClassVar[int]
    RETRIEVAL_MODE_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[RetrievedFact]
    conflicts: _containers.RepeatedCompositeFieldContainer[Conflict]
    freshness_warnings: _containers.RepeatedCompositeFieldContainer[FreshnessWarning]
    omitted: _containers.RepeatedCompositeFieldContainer[Omission]
    empty_reason: str
    assembler_version: str
    retrieval_mode: RetrievalMode
    def __init__(self, results: _Optional[_Iterable[_Union[RetrievedFact, _Mapping]]] = ..., conflicts: _Optional[_Iterable[_Union[Conflict, _Mapping]]] = ..., freshness_warnings: _Optional[_Iterable[_Union[FreshnessWarning, _Mapping]]] = ..., omitted: _Optional[_Iterable[_Union[Omission, _Mapping]]] = ..., empty_reason: _Optional[str] = ..., assembler_version: _Optional[str] = ..., retrieval_mode: _Optional[_Union[RetrievalMode, str]] = ...) -> None: ...

class AssembleContextRequest(_message.Message):
    __slots__ = ("scope_id", "query", "limit", "token_budget", "filters", "compact_citations", "assembler_version")
    SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    TOKEN_BUDGET_FIELD_NUMBER: _ClassVar[int]
    FILTERS_FIELD_NUMBER: _ClassVar[int]
    COMPACT_CITATIONS_FIELD_NUMBER: _ClassVar[int]
    ASSEMBLER_VERSION_FIELD_NUMBER: _ClassVar[int]
    scope_id: str
    query: str
    limit: int
    token_budget: int
    filters: RetrievalFilters
    compact_citations: bool
    assembler_version: str
    def __init__(self, scope_id: _Optional[str] = ..., query: _Optional[str] = ..., limit: _Optional[int] = ..., token_budget: _Optional[int] = ..., filters: _Optional[_Union[RetrievalFilters, _Mapping]] = ..., compact_citations: _Optional[bool] = ..., assembler_version: _Optional[str] = ...) -> None: ...

class AssembleContextResponse(_message.Message):
    __slots__ = ("results", "conflicts", "freshness_warnings", "omitted", "token_estimate", "empty_reason", "assembler_version", "retrieval_mode")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    CONFLICTS_FIELD_NUMBER: _ClassVar[int]
    FRESHNESS_WARNINGS_FIELD_NUMBER: _ClassVar[int]
    OMITTED_FIELD_NUMBER: _ClassVar[int]
    TOKEN_ESTIMATE_FIELD_NUMBER: _ClassVar[int]
    EMPTY_REASON_FIELD_NUMBER: _ClassVar[int]
    ASSEMBLER_VERSION_FIELD_NUMBER: _ClassVar[int]
    RETRIEVAL_MODE_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[RetrievedFact]
    conflicts: _containers.RepeatedCompositeFieldContainer[Conflict]
    freshness_warnings: _containers.RepeatedCompositeFieldContainer[FreshnessWarning]
    omitted: _containers.RepeatedCompositeFieldContainer[Omission]
    token_estimate: int
    empty_reason: str
    assembler_version: str
    retrieval_mode: RetrievalMode
    def __init__(self, results: _Optional[_Iterable[_Union[RetrievedFact, _Mapping]]] = ..., conflicts: _Optional[_Iterable[_Union[Conflict, _Mapping]]] = ..., freshness_warnings: _Optional[_Iterable[_Union[FreshnessWarning, _Mapping]]] = ..., omitted: _Optional[_Iterable[_Union[Omission, _Mapping]]] = ..., token_estimate: _Optional[int] = ..., empty_reason: _Optional[str] = ..., assembler_version: _Optional[str] = ..., retrieval_mode: _Optional[_Union[RetrievalMode, str]] = ...) -> None: ...

class GetIndexStatusRequest(_message.Message):
    __slots__ = ("scope_id",)
    SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    scope_id: str
    def __init__(self, scope_id: _Optional[str] = ...) -> None: ...

class GetIndexStatusResponse(_message.Message):
    __slots__ = ("indexed_position", "head_position", "indexed_facts", "assembler_version")
    INDEXED_POSITION_FIELD_NUMBER: _ClassVar[int]
    HEAD_POSITION_FIELD_NUMBER: _ClassVar[int]
    INDEXED_FACTS_FIELD_NUMBER: _ClassVar[int]
    ASSEMBLER_VERSION_FIELD_NUMBER: _ClassVar[int]
    indexed_position: int
    head_position: int
    indexed_facts: int
    assembler_version: str
    def __init__(self, indexed_position: _Optional[int] = ..., head_position: _Optional[int] = ..., indexed_facts: _Optional[int] = ..., assembler_version: _Optional[str] = ...) -> None: ...

class RankFigures(_message.Message):
    __slots__ = ("queries", "hit", "recall", "mrr")
    QUERIES_FIELD_NUMBER: _ClassVar[int]
    HIT_FIELD_NUMBER: _ClassVar[int]
    RECALL_FIELD_NUMBER: _ClassVar[int]
    MRR_FIELD_NUMBER: _ClassVar[int]
    queries: int
    hit: float
    recall: float
    mrr: float
    def __init__(self, queries: _Optional[int] = ..., hit: _Optional[float] = ..., recall: _Optional[float] = ..., mrr: _Optional[float] = ...) -> None: ...

class RankGuard(_message.Message):
    __slots__ = ("switched_off_time", "model", "hand")
    SWITCHED_OFF_TIME_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    HAND_FIELD_NUMBER: _ClassVar[int]
    switched_off_time: _timestamp_pb2.Timestamp
    model: RankFigures
    hand: RankFigures
    def __init__(self, switched_off_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., model: _Optional[_Union[RankFigures, _Mapping]] = ..., hand: _Optional[_Union[RankFigures, _Mapping]] = ...) -> None: ...

class RankModel(_message.Message):
    __slots__ = ("model_id", "scope_id", "outcome", "active", "training_rows", "training_queries", "evaluated_packs", "metric", "model_figure", "hand_figure", "trained_at", "assembler_version", "model_hit", "hand_hit", "hit_at", "not_served_reason", "model_recall", "hand_recall", "replayed_queries", "cut", "switched_off")
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_FIELD_NUMBER: _ClassVar[int]
    TRAINING_ROWS_FIELD_NUMBER: _ClassVar[int]
    TRAINING_QUERIES_FIELD_NUMBER: _ClassVar[int]
    EVALUATED_PACKS_FIELD_NUMBER: _ClassVar[int]
    METRIC_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIGURE_FIELD_NUMBER: _ClassVar[int]
    HAND_FIGURE_FIELD_NUMBER: _ClassVar[int]
    TRAINED_AT_FIELD_NUMBER: _ClassVar[int]
    ASSEMBLER_VERSION_FIELD_NUMBER: _ClassVar[int]
    MODEL_HIT_FIELD_NUMBER: _ClassVar[int]
    HAND_HIT_FIELD_NUMBER: _ClassVar[int]
    HIT_AT_FIELD_NUMBER: _ClassVar[int]
    NOT_SERVED_REASON_FIELD_NUMBER: _ClassVar[int]
    MODEL_RECALL_FIELD_NUMBER: _ClassVar[int]
    HAND_RECALL_FIELD_NUMBER: _ClassVar[int]
    REPLAYED_QUERIES_FIELD_NUMBER: _ClassVar[int]
    CUT_FIELD_NUMBER: _ClassVar[int]
    SWITCHED_OFF_FIELD_NUMBER: _ClassVar[int]
    model_id: str
    scope_id: str
    outcome: RankFitOutcome
    active: bool
    training_rows: int
    training_queries: int
    evaluated_packs: int
    metric: str
    model_figure: float
    hand_figure: float
    trained_at: _timestamp_pb2.Timestamp
    assembler_version: str
    model_hit: float
    hand_hit: float
    hit_at: int
    not_served_reason: RankNotServedReason
    model_recall: float
    hand_recall: float
    replayed_queries: int
    cut: int
    switched_off: RankGuard
    def __init__(self, model_id: _Optional[str] = ..., scope_id: _Optional[str] = ..., outcome: _Optional[_Union[RankFitOutcome, str]] = ..., active: _Optional[bool] = ..., training_rows: _Optional[int] = ..., training_queries: _Optional[int] = ..., evaluated_packs: _Optional[int] = ..., metric: _Optional[str] = ..., model_figure: _Optional[float] = ..., hand_figure: _Optional[float] = ..., trained_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., assembler_version: _Optional[str] = ..., model_hit: _Optional[float] = ..., hand_hit: _Optional[float] = ..., hit_at: _Optional[int] = ..., not_served_reason: _Optional[_Union[RankNotServedReason, str]] = ..., model_recall: _Optional[float] = ..., hand_recall: _Optional[float] = ..., replayed_queries: _Optional[int] = ..., cut: _Optional[int] = ..., switched_off: _Optional[_Union[RankGuard, _Mapping]] = ...) -> None: ...

class EnableRankModelRequest(_message.Message):
    __slots__ = ("scope_id",)
    SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    scope_id: str
    def __init__(self, scope_id: _Optional[str] = ...) -> None: ...

class EnableRankModelResponse(_message.Message):
    __slots__ = ("enabled", "assembler_version")
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    ASSEMBLER_VERSION_FIELD_NUMBER: _ClassVar[int]
    enabled: RankModel
    assembler_version: str
    def __init__(self, enabled: _Optional[_Union[RankModel, _Mapping]] = ..., assembler_version: _Optional[str] = ...) -> None: ...

class FitRankModelRequest(_message.Message):
    __slots__ = ("scope_id", "max_rows", "recorded_after")
    SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    MAX_ROWS_FIELD_NUMBER: _ClassVar[int]
    RECORDED_AFTER_FIELD_NUMBER: _ClassVar[int]
    scope_id: str
    max_rows: int
    recorded_after: _timestamp_pb2.Timestamp
    def __init__(self, scope_id: _Optional[str] = ..., max_rows: _Optional[int] = ..., recorded_after: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class FitRankModelResponse(_message.Message):
    __slots__ = ("model",)
    MODEL_FIELD_NUMBER: _ClassVar[int]
    model: RankModel
    def __init__(self, model: _Optional[_Union[RankModel, _Mapping]] = ...) -> None: ...

class GetRankStatusRequest(_message.Message):
    __slots__ = ("scope_id",)
    SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    scope_id: str
    def __init__(self, scope_id: _Optional[str] = ...) -> None: ...

class GetRankStatusResponse(_message.Message):
    __slots__ = ("active", "last_fit", "assembler_version", "unservable", "switched_off")
    ACTIVE_FIELD_NUMBER: _ClassVar[int]
    LAST_FIT_FIELD_NUMBER: _ClassVar[int]
    ASSEMBLER_VERSION_FIELD_NUMBER: _ClassVar[int]
    UNSERVABLE_FIELD_NUMBER: _ClassVar[int]
    SWITCHED_OFF_FIELD_NUMBER: _ClassVar[int]
    active: RankModel
    last_fit: RankModel
    assembler_version: str
    unservable: RankModel
    switched_off: RankModel
    def __init__(self, active: _Optional[_Union[RankModel, _Mapping]] = ..., last_fit: _Optional[_Union[RankModel, _Mapping]] = ..., assembler_version: _Optional[str] = ..., unservable: _Optional[_Union[RankModel, _Mapping]] = ..., switched_off: _Optional[_Union[RankModel, _Mapping]] = ...) -> None: ...

class DisableRankModelRequest(_message.Message):
    __slots__ = ("scope_id",)
    SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    scope_id: str
    def __init__(self, scope_id: _Optional[str] = ...) -> None: ...

class DisableRankModelResponse(_message.Message):
    __slots__ = ("disabled", "assembler_version")
    DISABLED_FIELD_NUMBER: _ClassVar[int]
    ASSEMBLER_VERSION_FIELD_NUMBER: _ClassVar[int]
    disabled: RankModel
    assembler_version: str
    def __init__(self, disabled: _Optional[_Union[RankModel, _Mapping]] = ..., assembler_version: _Optional[str] = ...) -> None: ...
