"""Request text every service refuses before its handler runs.

PostgreSQL cannot store NUL (U+0000) in text, so a NUL anywhere in a request would
otherwise surface as a driver error deep in a store (``internal_error``). One walk over
the request message, in the server's error interceptor, turns it into ``invalid_input``
naming the field's path (``facts[3].evidence``, ``context.task_ref``) for every service.
"""

from __future__ import annotations

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from vera.errors import InvalidInput


def _check_string(path: str, value: str) -> None:
    if "\x00" in value:
        raise InvalidInput(path, "must not contain NUL", reason="invalid_character")


def _check_value(path: str, field: FieldDescriptor, value: object) -> None:
    if field.type == FieldDescriptor.TYPE_STRING:
        _check_string(path, value)  # type: ignore[arg-type]
    elif field.type == FieldDescriptor.TYPE_MESSAGE:
        check_request_text(value, f"{path}.")  # type: ignore[arg-type]


def check_request_text(message: Message, prefix: str = "") -> None:
    """Raises ``invalid_input`` for the first string field (at any depth, in repeated
    fields and maps, keys included) that holds a NUL."""
    for field, value in message.ListFields():
        path = f"{prefix}{field.name}"
        entry_type = field.message_type
        if (
            field.type == FieldDescriptor.TYPE_MESSAGE
            and entry_type is not None
            and entry_type.GetOptions().map_entry
        ):
            entry = entry_type.fields_by_name
            for key, item in value.items():
                if entry["key"].type == FieldDescriptor.TYPE_STRING:
                    _check_string(path, key)
                _check_value(f"{path}[{key}]", entry["value"], item)
        elif field.is_repeated:
            for i, item in enumerate(value):
                _check_value(f"{path}[{i}]", field, item)
        else:
            _check_value(path, field, value)
