"""The REST API process for humans and platform tools (never agents): identity
administration and curation. Like the gateway, it holds no business logic: each route
is a translation to one or a few gRPC calls."""
