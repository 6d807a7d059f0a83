from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class ErasePrincipalDataRequest(_message.Message):
    __slots__ = ("actor_principal_id", "principal_id", "personal_scope_id", "related_counts")
    class RelatedCountsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    ACTOR_PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    PERSONAL_SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    RELATED_COUNTS_FIELD_NUMBER: _ClassVar[int]
    actor_principal_id: str
    principal_id: str
    personal_scope_id: str
    related_counts: _containers.ScalarMap[str, int]
    def __init__(self, actor_principal_id: _Optional[str] = ..., principal_id: _Optional[str] = ..., personal_scope_id: _Optional[str] = ..., related_counts: _Optional[_Mapping[str, int]] = ...) -> None: ...

class ErasePrincipalDataResponse(_message.Message):
    __slots__ = ("counts", "audit_event_id", "change_position")
    class CountsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    AUDIT_EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    CHANGE_POSITION_FIELD_NUMBER: _ClassVar[int]
    counts: _containers.ScalarMap[str, int]
    audit_event_id: str
    change_position: int
    def __init__(self, counts: _Optional[_Mapping[str, int]] = ..., audit_event_id: _Optional[str] = ..., change_position: _Optional[int] = ...) -> None: ...
