import datetime

from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ContextPack(_message.Message):
    __slots__ = ("pack_id", "scope_id", "canonical_request", "content", "assembler_version", "created_at", "expires_at")
    PACK_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    CANONICAL_REQUEST_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    ASSEMBLER_VERSION_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    pack_id: str
    scope_id: str
    canonical_request: _struct_pb2.Struct
    content: _struct_pb2.Struct
    assembler_version: str
    created_at: _timestamp_pb2.Timestamp
    expires_at: _timestamp_pb2.Timestamp
    def __init__(self, pack_id: _Optional[str] = ..., scope_id: _Optional[str] = ..., canonical_request: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., content: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., assembler_version: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CreateContextPackRequest(_message.Message):
    __slots__ = ("principal_id", "scope_id", "canonical_request", "content", "assembler_version")
    PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    CANONICAL_REQUEST_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    ASSEMBLER_VERSION_FIELD_NUMBER: _ClassVar[int]
    principal_id: str
    scope_id: str
    canonical_request: _struct_pb2.Struct
    content: _struct_pb2.Struct
    assembler_version: str
    def __init__(self, principal_id: _Optional[str] = ..., scope_id: _Optional[str] = ..., canonical_request: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., content: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., assembler_version: _Optional[str] = ...) -> None: ...

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
