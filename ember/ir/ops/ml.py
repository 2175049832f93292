"""Classical ML and text-feature ops (pattern OPAQUE): ``tree_ensemble`` (ONNX-ML
TreeEnsemble) and ``tfidf_vectorizer`` (ONNX TfIdfVectorizer on integer tokens).

Both take their model as constant tables (the ONNX handler builds them from the node's
attributes), so the compiled kernel reads arrays instead of unrolling the model into code.

``tree_ensemble(x, node_ints, splits, members, roots, leaf_targets, leaf_weights)``:
``x`` is (N, F); ``node_ints`` is (nodes, 7) int32 with columns feature, mode, true next,
false next, missing-goes-true, first member, member count; a next (or a root) ``>= 0`` is
an interior node, ``-(leaf + 1)`` a leaf. Modes: 0 ``<=``, 1 ``<``, 2 ``>=``, 3 ``>``,
4 ``==``, 5 ``!=``, 6 member of ``members[first:first + count]``. Each tree adds its leaf's
weight to its leaf's target (``aggregate`` sum, average, min or max; a target no leaf
reaches is 0, as in onnxruntime); the result is
(N, n_targets) of x's dtype. ``depth`` bounds the steps of one walk.

``tfidf_vectorizer(x, pool, lengths, weights)``: ``x`` is (C,) or (B, C) tokens; output
column ``o`` counts the n-grams ``pool[o, k, :lengths[o, k]]`` found in each row with up
to ``max_skip`` tokens skipped between items (unigrams count once, not per skip), then
``mode`` TF gives the count, IDF ``weights[o]`` where the count is positive, TFIDF the
count times ``weights[o]``; float32 (B, O) or (O,).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ember.errors import IRError
from ember.ir.op import Attr, Attrs, OpDef, OpPattern, register_op
from ember.ir.ops.common import FLOAT_DTYPES, INDEX_DTYPES, check_data_dtype, check_dtype
from ember.ir.types import TensorType, Type

#: TreeEnsemble aggregate functions and node modes, in ONNX's numbering.
AGGREGATES = ("average", "sum", "min", "max")
MODES = ("leq", "lt", "gte", "gt", "eq", "neq", "member")
#: columns of the tree_ensemble node table.
FEATURE, MODE, TRUE_NEXT, FALSE_NEXT, MISSING_TRUE, FIRST_MEMBER, MEMBER_COUNT = range(7)
#: TfIdfVectorizer weighting modes.
TFIDF_MODES = ("TF", "IDF", "TFIDF")


def _tree_ensemble_type(types: Sequence[Type], attrs: Attrs) -> Type:
    x = check_dtype(types[0], FLOAT_DTYPES, "input of 'tree_ensemble'")
    if x.ndim != 2:
        raise IRError(f"tree_ensemble input must be (N, F), got shape {x.shape}")
    ints = check_dtype(types[1], frozenset({"int32"}), "node table of 'tree_ensemble'")
    if ints.ndim != 2 or ints.shape[1] != 7:
        raise IRError(f"tree_ensemble node table must be (nodes, 7), got {ints.shape}")
    for i, what in ((2, "splits"), (3, "members"), (6, "leaf weights")):
        check_data_dtype(x, check_dtype(types[i], FLOAT_DTYPES, what), what)
    check_dtype(types[4], frozenset({"int32"}), "tree roots of 'tree_ensemble'")
    check_dtype(types[5], frozenset({"int32"}), "leaf targets of 'tree_ensemble'")
    if attrs["aggregate"] not in AGGREGATES:
        raise IRError(f"tree_ensemble aggregate '{attrs['aggregate']}' not in {AGGREGATES}")
    return TensorType((x.shape[0], attrs["n_targets"]), x.dtype)


def _goes_true(mode: int, v: float, split: float, members: np.ndarray) -> bool:
    if mode == 6:
        return bool(np.any(members == v))
    compare = (
        np.less_equal,
        np.less,
        np.greater_equal,
        np.greater,
        np.equal,
        np.not_equal,
    )[mode]
    return bool(compare(v, split))


def _tree_ensemble_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x, ints, splits, members, roots, targets, weights = xs
    n_targets, aggregate = attrs["n_targets"], attrs["aggregate"]
    big = np.finfo(x.dtype).max
    init = {"min": big, "max": -big}.get(aggregate, 0.0)
    out = np.full((x.shape[0], n_targets), init, dtype=x.dtype)
    for n in range(x.shape[0]):
        for root in roots:
            node = int(root)
            for _ in range(attrs["depth"]):
                if node < 0:
                    break
                row = ints[node]
                v = x[n, row[FEATURE]]
                group = members[row[FIRST_MEMBER] : row[FIRST_MEMBER] + row[MEMBER_COUNT]]
                hit = _goes_true(int(row[MODE]), v, splits[node], group)
                hit = hit or (bool(row[MISSING_TRUE]) and bool(np.isnan(v)))
                node = int(row[TRUE_NEXT] if hit else row[FALSE_NEXT])
            if node >= 0:
                raise IRError("tree_ensemble: a walk did not reach a leaf within 'depth' steps")
            leaf = -node - 1
            t, w = int(targets[leaf]), weights[leaf]
            if aggregate in ("sum", "average"):
                out[n, t] += w
            elif aggregate == "min":
                out[n, t] = min(out[n, t], w)
            else:
                out[n, t] = max(out[n, t], w)
    if aggregate == "average":
        out = (out / max(len(roots), 1)).astype(x.dtype)
    elif aggregate in ("min", "max"):  # a target no leaf reached is 0, as onnxruntime
        out[out == init] = 0
    return out


def _tfidf_type(types: Sequence[Type], attrs: Attrs) -> Type:
    x = check_dtype(types[0], INDEX_DTYPES, "input of 'tfidf_vectorizer'")
    pool = check_dtype(types[1], frozenset({"int64"}), "pool of 'tfidf_vectorizer'")
    lengths = check_dtype(types[2], frozenset({"int32"}), "lengths of 'tfidf_vectorizer'")
    weights = check_dtype(types[3], frozenset({"float32"}), "weights of 'tfidf_vectorizer'")
    if x.ndim not in (1, 2):
        raise IRError(f"tfidf_vectorizer input must be (C,) or (B, C), got {x.shape}")
    if pool.ndim != 3 or lengths.shape != pool.shape[:2] or weights.shape != pool.shape[:1]:
        raise IRError(
            f"tfidf_vectorizer tables disagree: pool {pool.shape} (O, K, n), lengths "
            f"{lengths.shape} (O, K), weights {weights.shape} (O,)"
        )
    if attrs["mode"] not in TFIDF_MODES:
        raise IRError(f"tfidf_vectorizer mode '{attrs['mode']}' not in {TFIDF_MODES}")
    return TensorType((*x.shape[:-1], pool.shape[0]), "float32")


def tfidf_counts(row: np.ndarray, gram: Sequence[int], max_skip: int) -> int:
    """How often ``gram`` occurs in ``row`` with 0..max_skip tokens between its items."""
    n, size = len(gram), len(row)
    skips = range(1) if n == 1 else range(max_skip + 1)
    count = 0
    for d in skips:
        step = d + 1
        for p in range(size - (n - 1) * step):
            count += all(row[p + i * step] == gram[i] for i in range(n))
    return count


def _tfidf_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x, pool, lengths, weights = xs
    rows = x.reshape(-1, x.shape[-1])
    counts = np.zeros((rows.shape[0], pool.shape[0]), np.float32)
    for b, row in enumerate(rows):
        for o in range(pool.shape[0]):
            for k in range(pool.shape[1]):
                if lengths[o, k] > 0:
                    gram = pool[o, k, : lengths[o, k]]
                    counts[b, o] += tfidf_counts(row, gram.tolist(), attrs["max_skip"])
    if attrs["mode"] == "IDF":
        counts = np.where(counts > 0, weights, np.float32(0))
    elif attrs["mode"] == "TFIDF":
        counts = counts * weights
    return counts.astype(np.float32).reshape(*x.shape[:-1], pool.shape[0])


register_op(
    OpDef(
        "tree_ensemble",
        7,
        _tree_ensemble_type,
        _tree_ensemble_ref,
        OpPattern.OPAQUE,
        {
            "n_targets": Attr("int"),
            "aggregate": Attr("str", "sum", "average, sum, min or max over the trees"),
            "depth": Attr("int", doc="steps that bring every walk to a leaf"),
        },
        doc="a forest of decision trees from constant node tables (ONNX-ML TreeEnsemble)",
    )
)
register_op(
    OpDef(
        "tfidf_vectorizer",
        4,
        _tfidf_type,
        _tfidf_ref,
        OpPattern.OPAQUE,
        {
            "mode": Attr("str", "TF", "TF, IDF or TFIDF"),
            "max_skip": Attr("int", 0, "tokens that may be skipped between n-gram items"),
        },
        doc="n-gram counts of integer token rows, weighted (ONNX TfIdfVectorizer)",
    )
)


def _label_encode_type(types: Sequence[Type], attrs: Attrs) -> Type:
    x = check_dtype(types[0], frozenset({"string"}), "input of 'label_encode_string'")
    keys = check_dtype(types[1], frozenset({"string"}), "keys of 'label_encode_string'")
    values = types[2]
    if not isinstance(values, TensorType) or values.shape != (keys.size + 1,):
        raise IRError(
            f"label_encode_string: values must be a vector of {keys.size + 1} elements (one per "
            f"key, then the default), got {values}"
        )
    return TensorType(x.shape, values.dtype)


def _label_encode_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x, keys, values = xs
    table = {str(k): i for i, k in enumerate(keys.tolist())}
    index = [table.get(str(s), len(table)) for s in x.reshape(-1).tolist()]
    return np.asarray(values)[np.array(index, dtype=np.int64)].reshape(x.shape)


register_op(
    OpDef(
        "label_encode_string",
        3,
        _label_encode_type,
        _label_encode_ref,
        OpPattern.OPAQUE,
        doc="LabelEncoder with string keys: values[index of x in keys], the default last",
    )
)
