"""The pinned MiniLM graph, rewritten in memory at load time so onnxruntime runs it fast.

The shipped ``model.onnx`` stores its 36 weight matrices as int8 with a float scale
per output column, and turns them back into float32 with ``Cast`` + ``Mul``:
onnxruntime folds those into float32 constants, so every matrix product runs in
float32. Its attention is torch's exported scaled-dot-product pattern (``Where`` /
``IsNaN`` masking) and its GELU an ``Erf`` chain, neither of which onnxruntime's
optimizer fuses. Two rewrites, both on onnxruntime's own contrib operators:

* **fused** (always, same vectors): each layer's attention becomes one
  ``MultiHeadAttention`` (the three biases packed into it, the padding mask as a
  key mask) and each GELU one ``Gelu``. Vectors equal the shipped graph's to
  float32 rounding.
* **int8 products** (``int8=True``): the weight products named in ``kinds`` run as
  ``DynamicQuantizeMatMul`` on the shipped int8 weights and per-column scales as
  they are (nothing re-quantized); only each product's input is quantized, to
  uint8 with one scale per batch. That is a small, deliberate change of the
  vectors (docs/tuning-embedders.md measures it).

Bytes in, bytes out, in ~0.1 s (plus ~0.6 s to import ``onnx``, which is why the
embedder keeps the result on disk when it may). The rewrite checks it
found every block it expects and raises :class:`GraphRewriteError` otherwise.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from nautilus_ranking.errors import NautilusError

if TYPE_CHECKING:
    from onnx import GraphProto, ModelProto, NodeProto, TensorProto

LAYERS = 6
HEADS = 12
ALL_KINDS = frozenset({"qkv", "attn_out", "ffn_up", "ffn_down"})
#: Which weight products ``int8=True`` runs in int8: all of them (query/key/value and
#: attention output projections, feed-forward up and down). Leaving the down
#: projection in float32 (its input, the GELU output, has the outliers BERT-family
#: models are known for) halves the cosine loss but costs ~25% more time, and neither
#: changed nDCG@10 on the shared collections (docs/tuning-embedders.md).
INT8_KINDS = ALL_KINDS
CONTRIB = "com.microsoft"
#: The rewrite's version: raise it with any change to what :func:`rewrite` makes. It keys
#: the vectors stored on disk and the rewritten graph cached there
#: (:mod:`nautilus_ranking.embedders.vector_cache`), so neither outlives the graph that
#: made it.
REWRITE_VERSION = "1"
#: sha256 of what :func:`rewrite` makes of the pinned model (onnx==1.23.2), by its
#: int8 kinds ("float32": none). A graph kept on disk is loaded only if it is one of
#: these (a digest beside the file proves nothing: it is swapped with the file), and
#: the vectors stored on disk are keyed on it. Regenerate with any change to the rewrite.
PINNED_GRAPHS = {
    ",".join(sorted(ALL_KINDS)): "8ef1affd412ab8daefb58791af1330fc95fea68ea07e9885ba62c4c2d67f141e",
    "float32": "295f8b6e332f01c18748377be4152cdd51b1863499d399396853ca7b69335ab5",
}


class GraphRewriteError(NautilusError, RuntimeError):
    """The model graph is not the one the rewrite was written for."""


def _layer_of(initializer_name: str) -> str:
    return initializer_name.split(".encoder.layer.")[1].split(".")[0]


def rewrite(model_bytes: bytes, int8: bool, kinds: Iterable[str] = INT8_KINDS) -> bytes:
    """The fused graph of the shipped model, with int8 products for ``kinds`` if
    ``int8``; ``kinds`` ⊆ {qkv, attn_out, ffn_up, ffn_down}."""
    import onnx

    chosen = frozenset(kinds) if int8 else frozenset()
    if not chosen <= ALL_KINDS:
        raise ValueError(f"kinds {sorted(chosen - ALL_KINDS)} are not among {sorted(ALL_KINDS)}")
    from google.protobuf.message import DecodeError

    try:
        model = onnx.load_from_string(model_bytes)
    except DecodeError as exc:
        raise GraphRewriteError(f"not an ONNX model ({exc})") from exc
    index = _GraphIndex(model.graph)
    products = _weight_products(index, chosen)
    attention, biases = _attention_nodes(index, products.context_of_layer)
    added = [*attention, *_gelu_nodes(model.graph)]
    _splice(model, products.replaced, added, [*products.initializers, *biases])
    return bytes(model.SerializeToString())


class _GraphIndex:
    """Who makes and who reads each value of the graph, and its initializers: the
    lookups every rewrite step walks the graph with."""

    def __init__(self, graph: GraphProto) -> None:
        self.graph = graph
        self.producer = {out: node for node in graph.node for out in node.output}
        self.consumers: dict[str, list[NodeProto]] = defaultdict(list)
        for node in graph.node:
            for name in node.input:
                self.consumers[name].append(node)
        self.initializers = {init.name: init for init in graph.initializer}
        self.matmul_inputs = Counter(n.input[0] for n in graph.node if n.op_type == "MatMul")

    def weight_of(self, matmul: NodeProto) -> tuple[str, str] | None:
        """(int8 weight, scale) initializer names when the product's right side is
        ``Cast(int8) * scale``, else None (an activation × activation product)."""
        mul = self.producer.get(matmul.input[1])
        cast = self.producer.get(mul.input[0]) if mul is not None and mul.op_type == "Mul" else None
        if (
            cast is None
            or cast.op_type != "Cast"
            or cast.input[0] not in self.initializers
            or mul is None
            or mul.input[1] not in self.initializers
        ):
            return None
        return cast.input[0], mul.input[1]

    def kind_of(self, matmul: NodeProto) -> str:
        """Which weight product this is, told by what feeds it (the exported names)."""
        a = matmul.input[0]
        if a.startswith("gelu"):
            return "ffn_down"
        if a.startswith("view"):
            return "attn_out"
        return "qkv" if self.matmul_inputs[a] == 3 else "ffn_up"


@dataclass
class _WeightProducts:
    """What the walk over the weight products found and made."""

    #: id of a float32 product -> the int8 node that replaces it
    replaced: dict[int, list[NodeProto]] = field(default_factory=dict)
    #: the per-column scales the int8 nodes read
    initializers: list[TensorProto] = field(default_factory=list)
    #: layer -> the context the attention output projection reads (MultiHeadAttention's output)
    context_of_layer: dict[str, str] = field(default_factory=dict)


def _weight_products(index: _GraphIndex, chosen: frozenset[str]) -> _WeightProducts:
    """Each weight product of the ``chosen`` kinds swapped for ``DynamicQuantizeMatMul``
    on the shipped int8 weights, and each layer's attention context found; raises
    unless every product the model should have was found."""
    from onnx import helper, numpy_helper

    found = _WeightProducts()
    products: Counter[str] = Counter()
    for node in index.graph.node:
        if node.op_type != "MatMul" or (weight := index.weight_of(node)) is None:
            continue
        kind = index.kind_of(node)
        products[kind] += 1
        if kind == "attn_out":
            bias = [c for c in index.consumers[node.output[0]] if c.op_type == "Add"]
            if len(bias) == 1 and bias[0].input[1] in index.initializers:
                found.context_of_layer[_layer_of(bias[0].input[1])] = node.input[0]
        if kind not in chosen:
            continue
        quantized, scale = weight
        scales = numpy_helper.to_array(index.initializers[scale])
        per_column = scales.reshape(-1).astype(np.float32)
        found.initializers.append(numpy_helper.from_array(per_column, f"{scale}_per_column"))
        found.replaced[id(node)] = [
            helper.make_node(
                "DynamicQuantizeMatMul",
                [node.input[0], quantized, f"{scale}_per_column"],
                list(node.output),
                name=f"{node.name}_int8",
                domain=CONTRIB,
            )
        ]
    expected = {"qkv": 3 * LAYERS, "attn_out": LAYERS, "ffn_up": LAYERS, "ffn_down": LAYERS}
    if dict(products) != expected or len(found.context_of_layer) != LAYERS:
        raise GraphRewriteError(
            f"expected weight products {expected} in {LAYERS} layers, "
            f"found {dict(products)} ({len(found.context_of_layer)} layers)"
        )
    return found


def _attention_nodes(
    index: _GraphIndex, context_of_layer: dict[str, str]
) -> tuple[list[NodeProto], list[TensorProto]]:
    """The nodes (and packed biases) that replace each layer's exported attention: the
    three bias Adds of a layer feed one MultiHeadAttention, whose output replaces the
    (batch, sequence, hidden) context the output projection reads."""
    from onnx import TensorProto, helper, numpy_helper

    biases: dict[str, dict[str, NodeProto]] = defaultdict(dict)
    for node in index.graph.node:
        if (
            node.op_type == "Add"
            and node.input[1] in index.initializers
            and ".attention.self." in node.input[1]
        ):
            role = node.input[1].split(".attention.self.")[1].split(".")[0]
            biases[_layer_of(node.input[1])][role] = node
    added = [
        helper.make_node(
            "Cast",
            ["attention_mask"],
            ["attention_mask_int32"],
            to=TensorProto.INT32,
            name="attention_mask_int32",
        )
    ]
    packed_biases = []
    for layer, context in sorted(context_of_layer.items()):
        roles = biases.get(layer, {})
        if set(roles) != {"query", "key", "value"}:
            raise GraphRewriteError(
                f"layer {layer}: query/key/value biases not found (found {sorted(roles)})"
            )
        adds = [roles["query"], roles["key"], roles["value"]]
        packed = np.concatenate(
            [numpy_helper.to_array(index.initializers[a.input[1]]) for a in adds]
        )
        packed_biases.append(
            numpy_helper.from_array(packed.astype(np.float32), f"layer_{layer}_qkv_bias")
        )
        added.append(
            helper.make_node(
                "MultiHeadAttention",
                [
                    adds[0].input[0],
                    adds[1].input[0],
                    adds[2].input[0],
                    f"layer_{layer}_qkv_bias",
                    "attention_mask_int32",
                ],
                [context],
                name=f"layer_{layer}_attention",
                domain=CONTRIB,
                num_heads=HEADS,
            )
        )
    return added, packed_biases


def _gelu_nodes(graph: GraphProto) -> list[NodeProto]:
    """One fused ``Gelu`` for each exported GELU, x * (0.5 * (1 + erf(x / sqrt 2))),
    which ends in the Mul named gelu*."""
    from onnx import helper

    gelus = [n for n in graph.node if n.op_type == "Mul" and n.output[0].startswith("gelu")]
    if len(gelus) != LAYERS:
        raise GraphRewriteError(f"expected {LAYERS} GELUs, found {len(gelus)}")
    return [
        helper.make_node(
            "Gelu",
            [node.input[0]],
            list(node.output),
            name=f"{node.name}_fused",
            domain=CONTRIB,
        )
        for node in gelus
    ]


def _splice(
    model: ModelProto,
    replaced: dict[int, list[NodeProto]],
    added: list[NodeProto],
    new_initializers: list[TensorProto],
) -> None:
    """Put the new nodes in the graph in place of the ones they replace, drop what
    nothing reads any more (nodes and initializers), and declare the contrib domain."""
    from onnx import helper

    graph = model.graph
    rewritten = {out for node in added for out in node.output}
    nodes: list[NodeProto] = []
    for node in graph.node:
        if id(node) in replaced:
            nodes.extend(replaced[id(node)])
        elif not rewritten.intersection(node.output):
            nodes.append(node)
    nodes.extend(added)
    ordered = _live_in_order(nodes, [out.name for out in graph.output])
    del graph.node[:]
    graph.node.extend(ordered)
    graph.initializer.extend(new_initializers)
    used = {name for node in ordered for name in node.input}
    live = [init for init in graph.initializer if init.name in used]
    del graph.initializer[:]
    graph.initializer.extend(live)
    if not any(op.domain == CONTRIB for op in model.opset_import):
        model.opset_import.append(helper.make_opsetid(CONTRIB, 1))


def _live_in_order(nodes: list[NodeProto], outputs: list[str]) -> list[NodeProto]:
    """The nodes the outputs depend on, each after its inputs (what the replaced
    nodes fed, e.g. the Erf chain and the masking, is left out)."""
    producer = {out: node for node in nodes for out in node.output}
    seen: set[int] = set()
    ordered: list[NodeProto] = []
    stack: list[tuple[NodeProto, bool]] = [
        (producer[name], False) for name in reversed(outputs) if name in producer
    ]
    while stack:
        node, inputs_done = stack.pop()
        if inputs_done:
            ordered.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        for name in reversed(node.input):
            parent = producer.get(name)
            if parent is not None and id(parent) not in seen:
                stack.append((parent, False))
    return ordered
