"""What retrieval reads from knowledge over gRPC: fact versions and the change log."""
