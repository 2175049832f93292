"""ONNX handlers of the ml family: the ``ai.onnx.ml`` ops TreeEnsemble, ArrayFeatureExtractor
and Binarizer, and TfIdfVectorizer (default domain, integer tokens; string pools are not
supported).

TreeEnsemble and TfIdfVectorizer turn the node's attributes into constant tables, the
inputs of ``tree_ensemble`` and ``tfidf_vectorizer``; ArrayFeatureExtractor is a ``take``
along the last axis and Binarizer a comparison cast back to the input's dtype.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ember.errors import OpNotSupportedError
from ember.frontend.onnx.common import arg, scalar_const, ttype
from ember.frontend.onnx.context import ConvertContext, NodeView
from ember.frontend.onnx.registry import INT_TYPES, NUMERIC_TYPES, onnx_op
from ember.ir.expr import Constant, Expr, call
from ember.ir.ops.common import np_dtype
from ember.ir.ops.ml import AGGREGATES, TFIDF_MODES

#: the domain of the classical ML ops.
ML_DOMAIN = "ai.onnx.ml"
#: TreeEnsemble post transforms ember applies, by ONNX number (3 SOFTMAX_ZERO and 4 PROBIT
#: are refused).
POST_TRANSFORMS = {0: "none", 1: "softmax", 2: "logistic"}


@onnx_op("Binarizer", since=1, domain=ML_DOMAIN, dtypes=NUMERIC_TYPES)
def binarizer(ctx: ConvertContext, node: NodeView) -> Expr:
    """Binarizer: 1 where x > threshold, else 0, in x's dtype."""
    x = arg(ctx, node, 0)
    dtype = ttype(x).dtype
    above = call("greater", x, scalar_const(float(node.attr("threshold", 0.0)), dtype))
    return call("cast", above, dtype=dtype, name=node.name)


@onnx_op("ArrayFeatureExtractor", since=1, domain=ML_DOMAIN, dtypes=NUMERIC_TYPES)
def array_feature_extractor(ctx: ConvertContext, node: NodeView) -> Expr:
    """ArrayFeatureExtractor: the columns at the (flattened) indices of the last axis; a
    vector input gives one row, as onnxruntime does."""
    x, indices = arg(ctx, node, 0), arg(ctx, node, 1, "Y (the indices)")
    shape = ttype(x).shape
    count = ttype(indices).size
    flat = call("reshape", indices, newshape=(count,))
    picked = call("take", x, flat, axis=len(shape) - 1, name=node.name)
    if len(shape) == 1:
        return call("reshape", picked, newshape=(1, count))
    return picked


def _ints(node: NodeView, name: str, default: Sequence[int] | None = None) -> list[int]:
    value = node.attr(name, default)
    return [int(v) for v in np.asarray(value).reshape(-1)]


def _values(node: NodeView, name: str, dtype: str) -> np.ndarray:
    return np.asarray(node.attr(name)).reshape(-1).astype(np_dtype(dtype))


def _walk_depth(ctx: ConvertContext, node: NodeView, nexts: np.ndarray, roots: list[int]) -> int:
    """The most steps any walk from ``roots`` takes to a leaf (a cycle is an error)."""
    memo: dict[int, int] = {}
    for root in roots:
        stack, on_path = [(root, False)], set()
        while stack:
            k, done = stack.pop()
            if k < 0 or k in memo and not done:
                continue
            if done:
                on_path.discard(k)
                memo[k] = 1 + max(memo.get(int(c), 0) for c in nexts[k])
                continue
            if k in on_path:
                ctx.fail(node, f"the trees contain a cycle through node {k}; fix the model")
            on_path.add(k)
            stack.append((k, True))
            stack.extend((int(c), False) for c in nexts[k] if c >= 0 and int(c) not in memo)
    return max((memo.get(r, 0) for r in roots), default=0)


@onnx_op("TreeEnsemble", since=5, domain=ML_DOMAIN, dtypes={"float32", "float64"})
def tree_ensemble(ctx: ConvertContext, node: NodeView) -> Expr:
    """TreeEnsemble: the forest as constant node tables walked by ``tree_ensemble``."""
    x = arg(ctx, node, 0)
    dtype = ttype(x).dtype
    if ttype(x).ndim != 2:
        ctx.fail(node, f"X must be (N, F), got shape {ttype(x).shape}")
    post = int(node.attr("post_transform", 0))
    if post not in POST_TRANSFORMS:
        raise OpNotSupportedError(
            f"{ctx.where(node)}: post_transform {post} is not supported (0 NONE, 1 SOFTMAX "
            "and 2 LOGISTIC are); apply it to the raw scores after the node instead"
        )
    aggregate = int(node.attr("aggregate_function", 1))
    if not 0 <= aggregate < len(AGGREGATES):
        ctx.fail(node, f"aggregate_function {aggregate} is not one of 0..3")
    modes = _ints(node, "nodes_modes")
    count = len(modes)
    features = _ints(node, "nodes_featureids")
    true_ids, false_ids = _ints(node, "nodes_truenodeids"), _ints(node, "nodes_falsenodeids")
    true_leaf = _ints(node, "nodes_trueleafs")
    false_leaf = _ints(node, "nodes_falseleafs")
    missing = _ints(node, "nodes_missing_value_tracks_true", [0] * count)
    columns = (features, true_ids, false_ids, true_leaf, false_leaf, missing)
    if any(len(c) != count for c in columns) or any(m > 6 or m < 0 for m in modes):
        ctx.fail(node, "the nodes_* attributes must all have one valid entry per node")
    width = ttype(x).shape[1]
    if any(not 0 <= f < width for f in features):
        ctx.fail(node, f"a feature id is outside the {width} features of X")
    ints = np.zeros((count, 7), np.int32)
    ints[:, 0], ints[:, 1], ints[:, 4] = features, modes, missing
    ints[:, 2] = [-(t + 1) if leaf else t for t, leaf in zip(true_ids, true_leaf, strict=True)]
    ints[:, 3] = [-(f + 1) if leaf else f for f, leaf in zip(false_ids, false_leaf, strict=True)]
    root_ids = _ints(node, "tree_roots")
    if ints[:, 2:4].max(initial=-1) >= count or any(not 0 <= r < count for r in root_ids):
        ctx.fail(node, f"a node id (next node or tree root) is outside the {count} nodes")
    members = _members(ctx, node, modes, ints, dtype)
    roots = []
    for r in root_ids:
        leaf_only = true_leaf[r] and false_leaf[r] and true_ids[r] == false_ids[r]
        roots.append(-(true_ids[r] + 1) if leaf_only else r)
    targets = np.asarray(_ints(node, "leaf_targetids"), np.int32)
    weights = _values(node, "leaf_weights", dtype)
    n_targets = int(node.attr("n_targets"))
    leaves = np.concatenate([-ints[:, 2:4].reshape(-1) - 1, -np.asarray(roots) - 1])
    used = leaves[leaves >= 0]
    if used.size and used.max() >= targets.size or targets.size != weights.size:
        ctx.fail(node, "a leaf id is outside leaf_targetids/leaf_weights")
    if targets.size and (targets.min() < 0 or targets.max() >= n_targets):
        ctx.fail(node, f"a leaf target is outside [0, {n_targets})")
    tables = [
        Constant(ints),
        Constant(_values(node, "nodes_splits", dtype)),
        Constant(members),
        Constant(np.asarray(roots, np.int32)),
        Constant(targets),
        Constant(weights),
    ]
    depth = _walk_depth(ctx, node, ints[:, 2:4], roots)
    scores = call(
        "tree_ensemble",
        x,
        *tables,
        n_targets=n_targets,
        aggregate=AGGREGATES[aggregate],
        depth=depth,
        name=node.name,
    )
    if POST_TRANSFORMS[post] == "softmax":
        return call("nn.softmax", scores, axis=1)
    if POST_TRANSFORMS[post] == "logistic":
        return call("sigmoid", scores)
    return scores


def _members(
    ctx: ConvertContext, node: NodeView, modes: list[int], ints: np.ndarray, dtype: str
) -> np.ndarray:
    """The member values of the set-membership nodes, each node's range set in ``ints``;
    ``membership_values`` lists them in node order, each set closed by a NaN."""
    member_nodes = [k for k, m in enumerate(modes) if m == 6]
    if not member_nodes:
        return np.zeros((1,), np_dtype(dtype))
    raw = np.asarray(node.attr("membership_values", np.zeros(0))).reshape(-1).astype(np.float64)
    cuts = np.flatnonzero(np.isnan(raw))
    if cuts.size < len(member_nodes):
        ctx.fail(node, "membership_values must close one NaN-terminated set per member node")
    values: list[float] = []
    start = 0
    for k, cut in zip(member_nodes, cuts, strict=False):
        group = raw[start:cut]
        ints[k, 5], ints[k, 6] = len(values), len(group)
        values.extend(group.tolist())
        start = int(cut) + 1
    return np.asarray(values or [0.0], np.float64).astype(np_dtype(dtype))


def _ngram_tables(
    ctx: ConvertContext, node: NodeView
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(pool (O, K, n), lengths (O, K), weights (O,), O) from the node's attributes."""
    if node.has_attr("pool_strings"):
        raise OpNotSupportedError(
            f"{ctx.where(node)}: string pools (pool_strings) are not supported; ember "
            "compiles numeric tensors only: map the strings to integer ids first"
        )
    pool = _ints(node, "pool_int64s")
    counts = _ints(node, "ngram_counts")
    indexes = _ints(node, "ngram_indexes")
    lo, hi = int(node.attr("min_gram_length")), int(node.attr("max_gram_length"))
    grams: dict[tuple[int, ...], int] = {}
    ngram_id = 0
    for i, start in enumerate(counts):
        size = i + 1
        end = counts[i + 1] if i + 1 < len(counts) else len(pool)
        for j in range(max(end - start, 0) // size):
            if ngram_id >= len(indexes):
                ctx.fail(node, "ngram_indexes has fewer entries than the pool has n-grams")
            if lo <= size <= hi:
                grams[tuple(pool[start + j * size : start + (j + 1) * size])] = indexes[ngram_id]
            ngram_id += 1
    outputs = max(indexes, default=-1) + 1
    by_column: list[list[tuple[int, ...]]] = [[] for _ in range(outputs)]
    for gram, column in grams.items():
        by_column[column].append(gram)
    width = max((len(c) for c in by_column), default=0) or 1
    longest = max((len(g) for g in grams), default=1)
    table = np.zeros((outputs, width, longest), np.int64)
    lengths = np.zeros((outputs, width), np.int32)
    for o, column_grams in enumerate(by_column):
        for k, gram in enumerate(column_grams):
            table[o, k, : len(gram)] = gram
            lengths[o, k] = len(gram)
    weights = np.asarray(node.attr("weights", []), np.float32).reshape(-1)
    if weights.size == 0:
        weights = np.ones(outputs, np.float32)
    if weights.size < outputs:
        ctx.fail(node, f"weights has {weights.size} values for {outputs} output columns")
    return table, lengths, weights[:outputs], outputs  # indexed by column, as onnxruntime


@onnx_op("TfIdfVectorizer", since=9, dtypes=INT_TYPES)
def tfidf_vectorizer(ctx: ConvertContext, node: NodeView) -> Expr:
    """TfIdfVectorizer on integer tokens: n-gram counts per row, weighted by mode."""
    x = arg(ctx, node, 0)
    if ttype(x).dtype not in ("int32", "int64"):
        x = call("cast", x, dtype="int64")
    mode = str(node.attr("mode"))
    if mode not in TFIDF_MODES:
        ctx.fail(node, f"mode '{mode}' is not one of {', '.join(TFIDF_MODES)}")
    if ttype(x).ndim not in (1, 2):
        ctx.fail(node, f"the input must be (C,) or (N, C), got shape {ttype(x).shape}")
    table, lengths, weights, _ = _ngram_tables(ctx, node)
    return call(
        "tfidf_vectorizer",
        x,
        Constant(table),
        Constant(lengths),
        Constant(weights),
        mode=mode,
        max_skip=int(node.attr("max_skip_count", 0)),
        name=node.name,
    )


def _label_values(node: NodeView) -> np.ndarray:
    """The LabelEncoder values as numpy (strings: object arrays), with the default last."""
    if node.attr("values_tensor", None) is not None:
        values = np.asarray(node.attr("values_tensor")).reshape(-1)
    elif node.attr("values_strings", None) is not None:
        values = np.array([*map(str, node.attr("values_strings")), None], dtype=object)[:-1]
    elif node.attr("values_floats", None) is not None:
        values = np.asarray(node.attr("values_floats"), dtype=np.float32)
    else:
        values = np.asarray(node.attr("values_int64s", []), dtype=np.int64)
    if node.attr("default_tensor", None) is not None:
        default = np.asarray(node.attr("default_tensor")).reshape(-1)[:1].astype(values.dtype)
    elif values.dtype == object:
        default = np.array([str(node.attr("default_string", "_Unused"))], dtype=object)
    elif values.dtype.kind == "f":
        default = np.array([node.attr("default_float", -0.0)], dtype=values.dtype)
    else:
        default = np.array([node.attr("default_int64", -1)], dtype=values.dtype)
    return np.concatenate([values, default])


@onnx_op("LabelEncoder", since=2, domain=ML_DOMAIN, dtypes={"string"})
def label_encoder(ctx: ConvertContext, node: NodeView) -> Expr:
    """LabelEncoder with string keys: a compiled binary search over the keys, sorted here by
    their UTF-8 bytes (docs/strings.md)."""
    if node.attr("keys_tensor", None) is not None:
        keys = [str(k) for k in np.asarray(node.attr("keys_tensor")).reshape(-1).tolist()]
    else:
        keys = [str(k) for k in node.attr("keys_strings", [])]
    values = _label_values(node)
    if len(values) != len(keys) + 1:
        ctx.fail(node, f"{len(keys)} keys but {len(values) - 1} values; give one value per key")
    order = sorted(range(len(keys)), key=lambda i: keys[i].encode("utf-8", "surrogateescape"))
    sorted_keys = np.array([*(keys[i] for i in order), None], dtype=object)[:-1]
    table = values[[*order, len(keys)]]
    return call(
        "label_encode_string",
        arg(ctx, node, 0),
        Constant(sorted_keys),
        Constant(table),
        name=node.name,
    )
