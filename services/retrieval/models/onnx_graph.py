"""MiniLM (a BERT encoder) as an ONNX graph, built from its ``config.json`` and
``model.safetensors`` with numpy and the ``onnx`` helpers: no torch.

The graph computes what transformers' ``BertModel(...).last_hidden_state`` does, in the
same order of operations torch's exporter wrote (biases added after each MatMul, the
attention scale split between query and key, masked keys at -inf, GELU by erf), so ONNX
Runtime fuses it the same way and int8 quantization sees the same MatMul weights.
Inputs ``input_ids``, ``attention_mask``, ``token_type_ids`` (int64, batch x tokens);
output ``last_hidden_state`` (float32, batch x tokens x hidden).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

OPSET = 17
IR_VERSION = 8
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT = "last_hidden_state"
# Weights the graph does not use: the pooler feeds only BertModel's pooled output, and
# the position ids are a buffer the graph computes itself.
_UNUSED = ("pooler.", "embeddings.position_ids")


class UnsupportedModel(ValueError):
    """The weights are not an encoder this builder reproduces."""


def _config(model_path: Path) -> dict:
    config = json.loads((model_path / "config.json").read_text())
    expected = {"model_type": "bert", "hidden_act": "gelu"}
    for key, value in expected.items():
        if config.get(key) != value:
            raise UnsupportedModel(f"{key} is {config.get(key)!r}, not {value!r}")
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise UnsupportedModel("only absolute position embeddings are supported")
    if config["hidden_size"] % config["num_attention_heads"]:
        raise UnsupportedModel("hidden_size is not a multiple of num_attention_heads")
    return config


def _weights(model_path: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    weights = load_file(str(model_path / "model.safetensors"))
    # A BertModel saved alone has no prefix; one saved inside a task head has "bert.".
    return {k.removeprefix("bert."): v.astype(np.float32) for k, v in weights.items()
            if not k.removeprefix("bert.").startswith(_UNUSED)}


class _Graph:
    def __init__(self, weights: dict[str, np.ndarray]) -> None:
        self.weights = weights
        self.used: set[str] = set()
        self.nodes: list = []
        self.initializers: list = []
        self._count = 0

    def weight(self, name: str, transpose: bool = False) -> str:
        from onnx import numpy_helper

        if name not in self.weights:
            raise UnsupportedModel(f"no weight {name!r}")
        self.used.add(name)
        array = self.weights[name]
        out = f"{name}.T" if transpose else name
        self.initializers.append(
            numpy_helper.from_array(np.ascontiguousarray(array.T if transpose else array), out))
        return out

    def constant(self, value: np.ndarray) -> str:
        from onnx import numpy_helper

        self._count += 1
        name = f"const_{self._count}"
        self.initializers.append(numpy_helper.from_array(value, name))
        return name

    def op(self, op_type: str, *inputs: str, **attributes: Any) -> str:
        from onnx import helper

        self._count += 1
        out = f"{op_type.lower()}_{self._count}"
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], **attributes))
        return out

    def linear(self, x: str, prefix: str) -> str:
        product = self.op("MatMul", x, self.weight(f"{prefix}.weight", transpose=True))
        return self.op("Add", self.weight(f"{prefix}.bias"), product)

    def layer_norm(self, x: str, prefix: str, epsilon: float) -> str:
        return self.op("LayerNormalization", x, self.weight(f"{prefix}.weight"),
                       self.weight(f"{prefix}.bias"), axis=-1, epsilon=epsilon)


def f32(value: object) -> np.ndarray:
    return np.array(value, np.float32)


def i64(value: object) -> np.ndarray:
    return np.array(value, np.int64)


def build(model_path: Path, out: Path) -> None:
    """Writes the encoder at ``model_path`` as an ONNX model to ``out``. Fails with
    UnsupportedModel when the config is not one this graph reproduces or a weight goes
    unused (an architecture it does not know)."""
    import onnx
    from onnx import TensorProto, helper

    config = _config(model_path)
    g = _Graph(_weights(model_path))
    eps = float(config["layer_norm_eps"])
    head = config["hidden_size"] // config["num_attention_heads"]
    # sdpa's 1/sqrt(head) applied half to the query and half to the key, as exported.
    scale = np.array(1 / math.sqrt(math.sqrt(head)), np.float32)

    words = g.op("Gather", g.weight("embeddings.word_embeddings.weight"), "input_ids")
    types = g.op("Gather", g.weight("embeddings.token_type_embeddings.weight"), "token_type_ids")
    tokens = g.op("Shape", "input_ids", start=1, end=2)
    positions = g.op("Range", g.constant(i64(0)), g.op("Squeeze", tokens, g.constant(i64([0]))),
                     g.constant(i64(1)))
    position = g.op("Gather", g.weight("embeddings.position_embeddings.weight"), positions)
    hidden = g.layer_norm(g.op("Add", g.op("Add", words, types), position),
                          "embeddings.LayerNorm", eps)

    # Keys that are padding get -inf before the softmax (batch x 1 x 1 x keys).
    keep = g.op("Cast", g.op("Unsqueeze", "attention_mask", g.constant(i64([1, 2]))),
                to=TensorProto.BOOL)
    bias = g.op("Where", keep, g.constant(f32(0.0)), g.constant(f32(-np.inf)))
    heads_shape = g.constant(i64([0, 0, -1, head]))
    minus_one = g.constant(i64([-1]))
    zero, one, half = g.constant(f32(0.0)), g.constant(f32(1.0)), g.constant(f32(0.5))
    root2, scale_c = g.constant(f32(math.sqrt(2.0))), g.constant(scale)

    for layer in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{layer}"

        def split(name: str, perm: list[int], x: str = hidden, p: str = p) -> str:
            return g.op("Transpose", g.op("Reshape", g.linear(x, f"{p}.attention.self.{name}"),
                                          heads_shape), perm=perm)

        query = g.op("Mul", split("query", [0, 2, 1, 3]), scale_c)
        key = g.op("Mul", split("key", [0, 2, 3, 1]), scale_c)
        value = split("value", [0, 2, 1, 3])
        scores = g.op("Add", g.op("MatMul", query, key), bias)
        probs = g.op("Softmax", scores, axis=-1)
        # A row whose keys are all padding is NaN after the softmax: zero, as torch does.
        probs = g.op("Where", g.op("IsNaN", probs), zero, probs)
        # Read from the tensor, as torch's export does: with a constant shape ONNX Runtime
        # fuses the Add and LayerNormalization below into one kernel, whose rounding moves
        # int8 vectors by up to 0.02 from the export's.
        merged_shape = g.op("Concat", g.op("Shape", hidden, end=2), minus_one, axis=0)
        context = g.op("Reshape", g.op("Transpose", g.op("MatMul", probs, value),
                                       perm=[0, 2, 1, 3]), merged_shape)
        attended = g.op("Add", g.linear(context, f"{p}.attention.output.dense"), hidden)
        hidden = g.layer_norm(attended, f"{p}.attention.output.LayerNorm", eps)
        inner = g.linear(hidden, f"{p}.intermediate.dense")
        gelu = g.op("Mul", g.op("Mul", inner, g.op("Add", g.op("Erf", g.op("Div", inner, root2)),
                                                   one)), half)
        output = g.op("Add", g.linear(gelu, f"{p}.output.dense"), hidden)
        hidden = g.layer_norm(output, f"{p}.output.LayerNorm", eps)

    if unused := sorted(set(g.weights) - g.used):
        raise UnsupportedModel(f"weights this graph does not use: {unused[:3]}")
    g.nodes.append(helper.make_node("Identity", [hidden], [OUTPUT]))
    axes = ["batch", "tokens"]
    graph = helper.make_graph(
        g.nodes, "minilm",
        [helper.make_tensor_value_info(name, TensorProto.INT64, axes) for name in INPUTS],
        [helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT,
                                       [*axes, config["hidden_size"]])],
        g.initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="vera")
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    out.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(out))
