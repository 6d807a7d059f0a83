"""The MiniLM embedder with the real shipped weights: batching keeps each text's vector,
and the int8 model is made once, checked against float32, and never silently replaced."""

from __future__ import annotations

import subprocess
import sys
import warnings
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from vera.services.retrieval import embedding
from vera.services.retrieval.embedding import MiniLMEmbedder


@pytest.fixture(scope="module")
async def torch_embedder() -> AsyncIterator[MiniLMEmbedder]:
    model = await MiniLMEmbedder.load(None, threads=2)
    yield model
    model.close()


async def test_batches_of_similar_length_return_vectors_in_the_callers_order(
    torch_embedder: MiniLMEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Texts are batched by length (less padding); each vector must still come back at
    its text's position, equal to that text embedded alone."""
    monkeypatch.setattr(embedding, "BATCH_SIZE", 3)
    texts = [
        "a much longer text about which database the payments service uses in production",
        "short",
        "a text of middling length about deploys",
        "x",
        "the ledger service stores balances in PostgreSQL and replicates them nightly",
        "tiny one",
        "another sentence of a medium size here",
    ]
    together = np.asarray(await torch_embedder.embed(texts))
    alone = np.asarray([(await torch_embedder.embed([t]))[0] for t in texts])
    assert together.shape == (len(texts), embedding.DIMENSIONS)
    np.testing.assert_allclose(together, alone, atol=1e-4)


async def test_no_texts_no_vectors(torch_embedder: MiniLMEmbedder) -> None:
    assert await torch_embedder.embed([]) == []


@pytest.fixture(scope="module")
def model_cache(tmp_path_factory: pytest.TempPathFactory):
    """A model cache holding the float32 export (made once for the module)."""
    cache = tmp_path_factory.mktemp("models")
    # export_onnx picks torch's legacy exporter on purpose (its docstring); its tracer warns.
    with ThreadPoolExecutor(1) as executor, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        embedding.load_onnx_sync(None, 2, cache, executor, "float32")
    return cache


async def test_int8_is_quantized_once_checked_and_close_to_float32(
    torch_embedder: MiniLMEmbedder, model_cache: Path
) -> None:
    texts = ["Which database does the ledger use?", "payments deploys through Argo CD",
             "billing-api owned by team Atlas"]
    with ThreadPoolExecutor(1) as executor:
        int8 = embedding.load_onnx_sync(None, 2, model_cache, executor, "int8")
        [quantized] = model_cache.glob("*-int8.onnx")
        made = quantized.stat().st_mtime_ns
        again = embedding.load_onnx_sync(None, 2, model_cache, executor, "int8")
    assert int8.backend == "onnx-int8"
    assert quantized.stat().st_mtime_ns == made  # the cached file serves the next start
    got = np.asarray(int8.embed_sync(texts))
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    want = np.asarray(await torch_embedder.embed(texts))
    assert (got * want).sum(axis=1).min() >= embedding.INT8_MIN_COSINE
    np.testing.assert_allclose(np.asarray(again.embed_sync(texts)), got, atol=1e-6)


def test_an_int8_model_that_strays_from_float32_is_deleted_not_served(
    model_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for old in model_cache.glob("*-int8.onnx"):
        old.unlink()
    monkeypatch.setattr(embedding, "INT8_MIN_COSINE", 1.01)  # no quantization gets there
    with ThreadPoolExecutor(1) as executor, pytest.raises(RuntimeError):
        embedding.load_onnx_sync(None, 2, model_cache, executor, "int8")
    assert not list(model_cache.glob("*-int8.onnx"))


async def test_int8_fails_to_load_rather_than_serve_float32(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The torch fallback has float32 only: serving it under an int8 contract version
    would rank with vectors the version does not name."""

    def unavailable(*args: object) -> None:
        raise ImportError("onnxruntime")

    monkeypatch.setattr(embedding, "_prepare_in_child", unavailable)
    with pytest.raises(RuntimeError):
        await embedding.load_embedder(None, 1, tmp_path, "int8")
    with pytest.raises(ValueError):
        await embedding.load_embedder(None, 1, tmp_path, "int4")
    fallback = await embedding.load_embedder(None, 1, tmp_path, "float32")
    try:
        assert fallback.backend == "torch"
    finally:
        fallback.close()


async def test_the_service_makes_its_model_files_in_a_child_process(
    model_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The one-off export and quantization hold torch's weights and the whole graph: done
    in the serving process they set its peak memory. Here the parent cannot do them (both
    raise), so the file the int8 embedder serves from must come from the child."""
    for old in model_cache.glob("*-int8.onnx"):
        old.unlink()

    def not_here(*args: object) -> None:
        raise AssertionError("the serving process made a model file itself")

    monkeypatch.setattr(embedding, "export_onnx", not_here)
    monkeypatch.setattr(embedding, "quantize_int8", not_here)
    served = await embedding.load_embedder(None, 1, model_cache, "int8")
    try:
        assert served.backend == "onnx-int8"
        assert len(list(model_cache.glob("*-int8.onnx"))) == 1
        [vector] = await served.embed(["which team owns billing"])
        assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-5
    finally:
        served.close()


def test_the_tokenizer_gives_transformers_ids_without_importing_it() -> None:
    """The serving path tokenizes with the `tokenizers` library (transformers pulls torch in
    at start): its batches must be exactly what transformers' tokenizer makes of the same
    model, padding and truncation at MAX_TOKENS included, in a process that never imports
    transformers."""
    from transformers import AutoTokenizer

    texts = [
        "Which database does the payments service use in production?",
        "x",
        "Ünïcödé, MIXED case & punctuation: café_naïve-2024 (v1.2.3) 東京",
        "",
        " ".join(["ledger"] * 400),  # past MAX_TOKENS: truncated
    ]
    reference = AutoTokenizer.from_pretrained(
        str(embedding.default_model_path()), local_files_only=True
    )
    want = reference(
        texts, padding=True, truncation=True, max_length=embedding.MAX_TOKENS, return_tensors="np"
    )
    got = embedding.MiniLMTokenizer().batch(texts)
    assert set(got) == {"input_ids", "attention_mask", "token_type_ids"}
    assert got["input_ids"].shape[1] == embedding.MAX_TOKENS
    for name, values in got.items():
        assert values.dtype == np.int64
        np.testing.assert_array_equal(values, want[name])
    bare = reference(texts, add_special_tokens=False, truncation=True,
                     max_length=embedding.MAX_TOKENS)["input_ids"]
    assert embedding.MiniLMTokenizer().ids(texts) == bare


def test_the_onnx_embedder_and_static_token_vectors_load_without_transformers_or_torch(
    model_cache: Path,
) -> None:
    """What a replica loads at start (the ONNX embedder from its cached file, the reranker's
    static token vectors) must not import transformers or torch: they were ~2.4 s of it."""
    code = (
        "import sys; from concurrent.futures import ThreadPoolExecutor; "
        "from pathlib import Path; from vera.services.retrieval import embedding, rerank; "
        "e = embedding.load_onnx_sync(None, 1, Path(sys.argv[1]), ThreadPoolExecutor(1)); "
        "assert len(e.embed_sync(['warm up'])[0]) == embedding.DIMENSIONS; "
        "rerank.StaticTokenVectors.load_sync()._tokens_sync(['warm up']); "
        "print(sorted(m for m in ('transformers', 'torch') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(model_cache)], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"
