"""The retrieval service's gRPC face: the servicer and its contract <-> domain mapping."""
