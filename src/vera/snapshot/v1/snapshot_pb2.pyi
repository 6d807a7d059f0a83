import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class IdempotencyState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    IDEMPOTENCY_STATE_UNSPECIFIED: _ClassVar[IdempotencyState]
    IDEMPOTENCY_STATE_CLAIMED: _ClassVar[IdempotencyState]
    IDEMPOTENCY_STATE_COMPLETED: _ClassVar[IdempotencyState]
    IDEMPOTENCY_STATE_IN_PROGRESS: _ClassVar[IdempotencyState]
    IDEMPOTENCY_STATE_MISMATCH: _ClassVar[IdempotencyState]
IDEMPOTENCY_STATE_UNSPECIFIED: IdempotencyState
IDEMPOTENCY_STATE_CLAIMED: IdempotencyState
IDEMPOTENCY_STATE_COMPLETED: IdempotencyState
IDEMPOTENCY_STATE_IN_PROGRESS: IdempotencyState
IDEMPOTENCY_STATE_MISMATCH: IdempotencyState

class ContextPack(_message.Message):
    __slots__ = ("pack_id", "scope_id", "canonical_request_json", "content_json", "assembler_version", "created_at", "expires_at")
    PACK_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    CANONICAL_REQUEST_JSON_FIELD_NUMBER: _ClassVar[int]
    CONTENT_JSON_FIELD_NUMBER: _ClassVar[int]
    ASSEMBLER_VERSION_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    pack_id: str
    scope_id: str
    canonical_request_json: str
    content_json: str
    assembler_version: str
    created_at: _timestamp_pb2.Timestamp
    expires_at: _timestamp_pb2.Timestamp
    def __init__(self, pack_id: _Optional[str] = ..., scope_id: _Optional[str] = ..., canonical_request_json: _Optional[str] = ..., content_json: _Optional[str] = ..., assembler_version: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CreateContextPackRequest(_message.Message):
    __slots__ = ("principal_id", "scope_id", "canonical_request_json", "content_json", "assembler_version", "usage_ref")
    PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    CANONICAL_REQUEST_JSON_FIELD_NUMBER: _ClassVar[int]
    CONTENT_JSON_FIELD_NUMBER: _ClassVar[int]
    ASSEMBLER_VERSION_FIELD_NUMBER: _ClassVar[int]
    USAGE_REF_FIELD_NUMBER: _ClassVar[int]
    principal_id: str
    scope_id: str
    canonical_request_json: str
    content_json: str
    assembler_version: str
    usage_ref: str
    def __init__(self, principal_id: _Optional[str] = ..., scope_id: _Optional[str] = ..., canonical_request_json: _Optional[str] = ..., content_json: _Optional[str] = ..., assembler_version: _Optional[str] = ..., usage_ref: _Optional[str] = ...) -> None: ...

class CreateContextPackResponse(_message.Message):
    __slots__ = ("pack", "deduplicated")
    PACK_FIELD_NUMBER: _ClassVar[int]
    DEDUPLICATED_FIELD_NUMBER: _ClassVar[int]
    pack: ContextPack
    deduplicated: bool
    def __init__(self, pack: _Optional[_Union[ContextPack, _Mapping]] = ..., deduplicated: _Optional[bool] = ...) -> None: ...

class GetContextPackRequest(_message.Message):
    __slots__ = ("principal_id", "pack_id")
    PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    PACK_ID_FIELD_NUMBER: _ClassVar[int]
    principal_id: str
    pack_id: str
    def __init__(self, principal_id: _Optional[str] = ..., pack_id: _Optional[str] = ...) -> None: ...

class GetContextPackResponse(_message.Message):
    __slots__ = ("pack",)
    PACK_FIELD_NUMBER: _ClassVar[int]
    pack: ContextPack
    def __init__(self, pack: _Optional[_Union[ContextPack, _Mapping]] = ...) -> None: ...

class Snapshot(_message.Message):
    __slots__ = ("snapshot_id", "scope_id", "as_of", "known_as_of", "fact_count", "source_count", "newest_source_observed_at", "oldest_source_observed_at", "change_position", "assembler_version", "ontology_version", "policy_version", "embedding_version", "index_version", "created_at")
    SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    AS_OF_FIELD_NUMBER: _ClassVar[int]
    KNOWN_AS_OF_FIELD_NUMBER: _ClassVar[int]
    FACT_COUNT_FIELD_NUMBER: _ClassVar[int]
    SOURCE_COUNT_FIELD_NUMBER: _ClassVar[int]
    NEWEST_SOURCE_OBSERVED_AT_FIELD_NUMBER: _ClassVar[int]
    OLDEST_SOURCE_OBSERVED_AT_FIELD_NUMBER: _ClassVar[int]
    CHANGE_POSITION_FIELD_NUMBER: _ClassVar[int]
    ASSEMBLER_VERSION_FIELD_NUMBER: _ClassVar[int]
    ONTOLOGY_VERSION_FIELD_NUMBER: _ClassVar[int]
    POLICY_VERSION_FIELD_NUMBER: _ClassVar[int]
    EMBEDDING_VERSION_FIELD_NUMBER: _ClassVar[int]
    INDEX_VERSION_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    snapshot_id: str
    scope_id: str
    as_of: _timestamp_pb2.Timestamp
    known_as_of: _timestamp_pb2.Timestamp
    fact_count: int
    source_count: int
    newest_source_observed_at: _timestamp_pb2.Timestamp
    oldest_source_observed_at: _timestamp_pb2.Timestamp
    change_position: int
    assembler_version: str
    ontology_version: str
    policy_version: str
    embedding_version: str
    index_version: str
    created_at: _timestamp_pb2.Timestamp
    def __init__(self, snapshot_id: _Optional[str] = ..., scope_id: _Optional[str] = ..., as_of: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., known_as_of: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., fact_count: _Optional[int] = ..., source_count: _Optional[int] = ..., newest_source_observed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., oldest_source_observed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., change_position: _Optional[int] = ..., assembler_version: _Optional[str] = ..., ontology_version: _Optional[str] = ..., policy_version: _Optional[str] = ..., embedding_version: _Optional[str] = ..., index_version: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CreateSnapshotRequest(_message.Message):
    __slots__ = ("principal_id", "scope_id", "as_of", "assembler_version", "ontology_version")
    PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    AS_OF_FIELD_NUMBER: _ClassVar[int]
    ASSEMBLER_VERSION_FIELD_NUMBER: _ClassVar[int]
    ONTOLOGY_VERSION_FIELD_NUMBER: _ClassVar[int]
    principal_id: str
    scope_id: str
    as_of: _timestamp_pb2.Timestamp
    assembler_version: str
    ontology_version: str
    def __init__(self, principal_id: _Optional[str] = ..., scope_id: _Optional[str] = ..., as_of: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., assembler_version: _Optional[str] = ..., ontology_version: _Optional[str] = ...) -> None: ...

class CreateSnapshotResponse(_message.Message):
    __slots__ = ("snapshot",)
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    snapshot: Snapshot
    def __init__(self, snapshot: _Optional[_Union[Snapshot, _Mapping]] = ...) -> None: ...

class GetSnapshotRequest(_message.Message):
    __slots__ = ("principal_id", "snapshot_id")
    PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    principal_id: str
    snapshot_id: str
    def __init__(self, principal_id: _Optional[str] = ..., snapshot_id: _Optional[str] = ...) -> None: ...

class GetSnapshotResponse(_message.Message):
    __slots__ = ("snapshot",)
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    snapshot: Snapshot
    def __init__(self, snapshot: _Optional[_Union[Snapshot, _Mapping]] = ...) -> None: ...

class BeginIdempotentCallRequest(_message.Message):
    __slots__ = ("principal_id", "key", "request_hash")
    PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    REQUEST_HASH_FIELD_NUMBER: _ClassVar[int]
    principal_id: str
    key: str
    request_hash: str
    def __init__(self, principal_id: _Optional[str] = ..., key: _Optional[str] = ..., request_hash: _Optional[str] = ...) -> None: ...

class BeginIdempotentCallResponse(_message.Message):
    __slots__ = ("state", "result_json")
    STATE_FIELD_NUMBER: _ClassVar[int]
    RESULT_JSON_FIELD_NUMBER: _ClassVar[int]
    state: IdempotencyState
    result_json: str
    def __init__(self, state: _Optional[_Union[IdempotencyState, str]] = ..., result_json: _Optional[str] = ...) -> None: ...

class CompleteIdempotentCallRequest(_message.Message):
    __slots__ = ("principal_id", "key", "request_hash", "result_json")
    PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    REQUEST_HASH_FIELD_NUMBER: _ClassVar[int]
    RESULT_JSON_FIELD_NUMBER: _ClassVar[int]
    principal_id: str
    key: str
    request_hash: str
    result_json: str
    def __init__(self, principal_id: _Optional[str] = ..., key: _Optional[str] = ..., request_hash: _Optional[str] = ..., result_json: _Optional[str] = ...) -> None: ...

class CompleteIdempotentCallResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ReleaseIdempotentCallRequest(_message.Message):
    __slots__ = ("principal_id", "key", "request_hash")
    PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    REQUEST_HASH_FIELD_NUMBER: _ClassVar[int]
    principal_id: str
    key: str
    request_hash: str
    def __init__(self, principal_id: _Optional[str] = ..., key: _Optional[str] = ..., request_hash: _Optional[str] = ...) -> None: ...

class ReleaseIdempotentCallResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ErasePrincipalDataRequest(_message.Message):
    __slots__ = ("principal_id",)
    PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    principal_id: str
    def __init__(self, principal_id: _Optional[str] = ...) -> None: ...

class ErasePrincipalDataResponse(_message.Message):
    __slots__ = ("counts",)
    class CountsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    counts: _containers.ScalarMap[str, int]
    def __init__(self, counts: _Optional[_Mapping[str, int]] = ...) -> None: ...

class ListAuditRecordsRequest(_message.Message):
    __slots__ = ("after_seq", "page_size", "action")
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    after_seq: int
    page_size: int
    action: str
    def __init__(self, after_seq: _Optional[int] = ..., page_size: _Optional[int] = ..., action: _Optional[str] = ...) -> None: ...

class AuditRecord(_message.Message):
    __slots__ = ("seq", "recorded_at", "actor", "action", "targets", "hash")
    class TargetsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SEQ_FIELD_NUMBER: _ClassVar[int]
    RECORDED_AT_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    TARGETS_FIELD_NUMBER: _ClassVar[int]
    HASH_FIELD_NUMBER: _ClassVar[int]
    seq: int
    recorded_at: _timestamp_pb2.Timestamp
    actor: str
    action: str
    targets: _containers.ScalarMap[str, str]
    hash: str
    def __init__(self, seq: _Optional[int] = ..., recorded_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., actor: _Optional[str] = ..., action: _Optional[str] = ..., targets: _Optional[_Mapping[str, str]] = ..., hash: _Optional[str] = ...) -> None: ...

class ListAuditRecordsResponse(_message.Message):
    __slots__ = ("records", "head_seq", "head_hash")
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    HEAD_SEQ_FIELD_NUMBER: _ClassVar[int]
    HEAD_HASH_FIELD_NUMBER: _ClassVar[int]
    records: _containers.RepeatedCompositeFieldContainer[AuditRecord]
    head_seq: int
    head_hash: str
    def __init__(self, records: _Optional[_Iterable[_Union[AuditRecord, _Mapping]]] = ..., head_seq: _Optional[int] = ..., head_hash: _Optional[str] = ...) -> None: ...
