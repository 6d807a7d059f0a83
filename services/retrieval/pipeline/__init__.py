"""Hybrid search and context assembly: the retriever, its rerank stage, the contract version."""
