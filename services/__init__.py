"""VERA services: each owns its schema and speaks only its protobuf contract."""
