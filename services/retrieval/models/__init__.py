"""The models retrieval runs: MiniLM (ONNX or torch) and the rerankers of a short list."""
