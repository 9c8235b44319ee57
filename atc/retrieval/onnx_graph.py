"""all-MiniLM-L6-v2 as an ONNX graph, written from the shipped safetensors weights (no torch).

onnxruntime runs a transformer several times faster than numpy when it gets its fused kernels:
``Attention`` (the Q/K/V product, the masked softmax and the context in one op),
``SkipLayerNormalization`` (residual + bias + LayerNorm) and ``BiasGelu``, all of the
``com.microsoft`` domain that the CPU provider implements. The graph below uses them directly,
so nothing depends on an exporter recognising a pattern, and it pools the output the way
sentence-transformers does for this model (mean over the real tokens, then L2-normalised).

The int8 variant is onnxruntime's dynamic quantisation of the same graph (weights of the
products in int8, activations quantised per product at run time): ``Attention`` becomes
``QAttention`` and ``MatMul`` becomes ``DynamicQuantizeMatMul``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

__all__ = ["build_model", "write_model", "quantize"]

_HEADS = 12
_EPS = 1e-12
_MS = "com.microsoft"


def build_model(weights: dict[str, np.ndarray]) -> Any:
    """The ``onnx.ModelProto`` of the encoder: inputs ``input_ids`` and ``attention_mask``
    (int32, ``[batch, tokens]``, padded on the right), output ``embedding`` (``[batch, 384]``,
    unit rows)."""
    # numpy: 60-120 ms to import, and a BM25-only search never needs it
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    inits: list[Any] = []
    nodes: list[Any] = []

    def const(name: str, array: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def f32(key: str) -> np.ndarray:
        return np.asarray(weights[key], dtype=np.float32)

    e = "embeddings."
    positions = f32(e + "position_embeddings.weight")
    # Every token has type 0: its embedding is folded into the positions'.
    positions = positions + f32(e + "token_type_embeddings.weight")[0]
    nodes.append(helper.make_node(
        "EmbedLayerNormalization",
        ["input_ids", "", const("word_embeddings", f32(e + "word_embeddings.weight")),
         const("position_embeddings", positions), "",
         const("embed_ln_weight", f32(e + "LayerNorm.weight")), const("embed_ln_bias", f32(e + "LayerNorm.bias")),
         "attention_mask"],
        ["x0", "mask_index"], domain=_MS, epsilon=_EPS, name="embeddings"))
    x = "x0"
    count = sum(1 for k in weights if k.endswith(".attention.self.query.weight"))
    for n in range(count):
        p = f"encoder.layer.{n}."
        qkv_w = np.concatenate([f32(p + f"attention.self.{m}.weight").T for m in ("query", "key", "value")], axis=1)
        qkv_b = np.concatenate([f32(p + f"attention.self.{m}.bias") for m in ("query", "key", "value")])
        nodes.append(helper.make_node(
            "Attention", [x, const(f"l{n}.qkv_w", qkv_w), const(f"l{n}.qkv_b", qkv_b), "mask_index"],
            [f"l{n}.ctx"], domain=_MS, num_heads=_HEADS, name=f"l{n}.attention"))
        nodes.append(helper.make_node("MatMul", [f"l{n}.ctx", const(f"l{n}.out_w", f32(p + "attention.output.dense.weight").T)],
                                      [f"l{n}.out"], name=f"l{n}.out"))
        nodes.append(helper.make_node(
            "SkipLayerNormalization",
            [f"l{n}.out", x, const(f"l{n}.ln1_w", f32(p + "attention.output.LayerNorm.weight")),
             const(f"l{n}.ln1_b", f32(p + "attention.output.LayerNorm.bias")),
             const(f"l{n}.out_b", f32(p + "attention.output.dense.bias"))],
            [f"l{n}.h"], domain=_MS, epsilon=_EPS, name=f"l{n}.ln1"))
        nodes.append(helper.make_node("MatMul", [f"l{n}.h", const(f"l{n}.up_w", f32(p + "intermediate.dense.weight").T)],
                                      [f"l{n}.up"], name=f"l{n}.up"))
        nodes.append(helper.make_node("BiasGelu", [f"l{n}.up", const(f"l{n}.up_b", f32(p + "intermediate.dense.bias"))],
                                      [f"l{n}.gelu"], domain=_MS, name=f"l{n}.gelu"))
        nodes.append(helper.make_node("MatMul", [f"l{n}.gelu", const(f"l{n}.down_w", f32(p + "output.dense.weight").T)],
                                      [f"l{n}.down"], name=f"l{n}.down"))
        nodes.append(helper.make_node(
            "SkipLayerNormalization",
            [f"l{n}.down", f"l{n}.h", const(f"l{n}.ln2_w", f32(p + "output.LayerNorm.weight")),
             const(f"l{n}.ln2_b", f32(p + "output.LayerNorm.bias")),
             const(f"l{n}.down_b", f32(p + "output.dense.bias"))],
            [f"l{n}.x"], domain=_MS, epsilon=_EPS, name=f"l{n}.ln2"))
        x = f"l{n}.x"
    # Mean over the real tokens: sum(x * mask) / sum(mask), then unit length.
    nodes += [
        helper.make_node("Cast", ["attention_mask"], ["maskf"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["maskf", const("axis2", np.array([2], dtype=np.int64))], ["mask3"]),
        helper.make_node("Mul", [x, "mask3"], ["masked"]),
        helper.make_node("ReduceSum", ["masked", const("axis1", np.array([1], dtype=np.int64))], ["summed"], keepdims=0),
        helper.make_node("ReduceSum", ["mask3", "axis1"], ["counts"], keepdims=0),
        helper.make_node("Max", ["counts", const("one", np.array([1.0], dtype=np.float32))], ["counts1"]),
        helper.make_node("Div", ["summed", "counts1"], ["pooled"]),
        helper.make_node("LpNormalization", ["pooled"], ["embedding"], axis=-1, p=2),
    ]
    graph = helper.make_graph(
        nodes, "all-MiniLM-L6-v2",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT32, ["batch", "tokens"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT32, ["batch", "tokens"])],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", 384])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(_MS, 1)],
                              producer_name="atc")
    model.ir_version = 8
    return model


def write_model(weights: dict[str, np.ndarray], path: Path) -> None:
    # onnx: optional (atc[onnx]); only writing the encoder's graph, once per machine, needs it
    import onnx

    onnx.save_model(build_model(weights), str(path))


def quantize(source: Path, target: Path) -> None:
    """onnxruntime's dynamic int8 quantisation: the weights of every product in int8, one scale
    per output channel (one scale per matrix moved vectors by a cosine of 0.965 on average,
    per channel by 0.994); the activations are quantised per product at run time."""
    import logging

    # onnx: optional (atc[onnx]); only writing the encoder's graph, once per machine, needs it
    from onnx import TensorProto
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # Its advice (to pre-process the graph) is logged as a warning on the root logger: meant for
    # who writes graphs, not for who imports tools.
    before = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        # Shape inference does not know the com.microsoft ops: every tensor of the graph is float32.
        quantize_dynamic(str(source), str(target), weight_type=QuantType.QInt8, per_channel=True,
                         extra_options={"DefaultTensorType": TensorProto.FLOAT})
    finally:
        logging.disable(before)
