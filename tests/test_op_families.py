"""One family name per op in every layer: an op's ONNX handlers, IR definition, compute and
tests are found under the same name X (frontend/onnx/X.py, ir/ops/X.py, ops/X.py,
tests/.../test_X*.py); every registered op belongs to exactly one family, the one listed in
docs/ir.md; and get_op finds every op after importing ember.ir alone."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import ember
from ember.frontend.onnx.registry import HANDLERS
from ember.ir import list_ops
from ember.ir.ops import FAMILIES
from ember.ops.registry import COMPUTES, LEGALIZERS, has_compute

PACKAGE = Path(ember.__file__).resolve().parent
TESTS = Path(__file__).resolve().parent
DOCS = PACKAGE.parent / "docs" / "ir.md"

#: frontend modules whose handlers build from other families' IR ops, with no op of their own
FRONTEND_ONLY = {
    "dynamic",  # NonZero, Unique, NonMaxSuppression evaluated at build time
    "loss",  # SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss by decomposition
    "optimizer",  # Adagrad, Momentum, Adam (preview training) as their update formulas
    "quant_contrib",  # onnxruntime's com.microsoft QLinear*/QGemm/...: dequantize, op, quantize
    "sequence",  # sequences and optionals resolved at import time (tuples of tensors)
    "signal",  # DFT as products with constant matrices
}
#: modules of each layer that are not op families (helpers, registries, infrastructure).
NOT_FAMILIES = {
    "ir/ops": {
        *["__init__", "common", "nn_conv_weights", "nn_conv_transpose_form", "quant_int8_ref"],
        "nn_conv_winograd_form",  # Winograd F(m, 3) matrices, weight transform, reference
    },
    "ops": {
        *[
            "__init__",
            "builtin",
            "common",
            "nn_common",
            "nn_schedule",
            "nn_schedule_tiles",
            "registry",
        ],
        "nn_conv_f32",  # the AVX2 conv micro-kernel's tiles (nn.conv_packed's schedule)
        "nn_conv_rewrite",  # conv tile reduction nests rewritten into micro-kernel calls
        "nn_matmul_tiles",  # small-M nn.matmul tiles on AVX-512 (schedule_matmul's helpers)
        "nn_conv_pair",  # tiles of two blocks of 16 channels (ember_f32_conv_tile2)
        "nn_conv_narrow",  # tiles of the 8- and 24-channel AVX2 conv micro-kernels
        "nn_conv_narrow_layout",  # blocks of 8 output channels regrouped by 24 for them
        "nn_conv_taps",  # nn.conv_packed weights packed taps first: the rule and the view
        "nn_conv_dead_taps",  # kernel taps that only read padding, dropped at compile time
        "index_scatter",  # ScatterND / ScatterElements as loop-IR store kernels
        "nn_conv_lanes",  # nn.conv_packed tiles with output positions as the lanes
        "nn_conv_pack",  # the packed forms the nn_conv legalizer chooses, the compute's tiles
        "nn_conv_groups",  # grouped convs whose groups do not pack: one packed conv per group
        "nn_conv_lane_groups",  # grouped convs of narrow groups: several groups a block of 16
        "nn_conv_layouts",  # nn.conv_packed input layouts: padded, channels-last, flattened 1x1
        "nn_conv_nhwc",  # channels-last (data_layout NHWC) packed convolutions and schedule
        "nn_conv_flat",  # flattened 1x1 loop-IR tiles on AVX-512: blocks per tile, strided
        "nn_conv_winograd",  # 3x3 stride-1 convs by Winograd F(m, 3): the choice, the compute
        "nn_conv_winograd_epilogue",  # bias/residual/ReLU moved into the Winograd call
        "nn_conv_transpose",  # kernel == stride: 1x1 conv + depth-to-space (nn_conv legalizes)
        "nn_rnn_kernel",  # the nn.recurrence loop nest (nn_rnn registers its compute)
        "nn_depthwise",  # depthwise convolutions as NCHW rows (nn.conv_depthwise_packed)
        "nn_depthwise_kernel",  # 3x3 channels-last depthwise tiles as ember_f32_dw3x3 calls
        "nn_depthwise_epilogue",  # a small depthwise tile's epilogue folded into its call
        "narrow_softmax",  # float16/bfloat16 softmax rounded per step as onnx's reference (nn_norm)
        "nn_softmax_rows",  # the float32 softmax over long rows, row by row (nn_norm)
    },
    "frontend/onnx": {
        "__init__",
        "common",
        "nn_common",
        "constants",  # Constant, Shape, Size, Range, ...: handlers that make no op of their own
        "context",
        "importer",
        "model_check",
        "registry",
        *FRONTEND_ONLY,
        # importer infrastructure
        "expand",  # ops defined by an ONNX function: replaced by the function's body
        "fft",  # signal.py's float32 FFT passes (pocketfft's order) as graph-IR ops
        "upgrade",  # opsets 1-6: onnx's version converter ...
        "upgrade_rules",  # ... and ember's own rules where it has none or is wrong
        "subgraph",  # Loop/Scan/If/SequenceMap bodies as closed ir Functions
        "sequence_io",  # sequences as model inputs/outputs, one tensor per element
        "cast_rules",  # ONNX's Cast rules (float8 saturate, e8m0 rounding): elemwise, quant
    },
}
#: test files of the layers' test folders that are not about one family (the importer's).
NOT_FAMILY_TESTS = {
    "frontend/onnx": {
        *["constants", "conformance", "errors", "importer", "light_models"],
        *FRONTEND_ONLY,
        *["expand", "upgrade", "onnx_support_doc"],
        "optional_inputs",  # empty optional model inputs (importer)
    },
}

# Records the module that registers each op, in a process that imports only ember.ir.
_PROBE = """
import json, sys
from ember.ir import op as irop
where = {}
register = irop.OPS.register
def recording(name, value, override=False):
    frame = sys._getframe(1)
    while frame.f_globals.get("__name__") in ("ember.ir.op", "ember.support.registry"):
        frame = frame.f_back
    where[name] = frame.f_globals.get("__name__")
    return register(name, value, override)
irop.OPS.register = recording
import ember.ir
found = {name: ember.ir.get_op(name).name for name in ember.ir.list_ops()}
loaded = sorted(m for m in sys.modules if m == "ember.ops" or m.startswith("ember.ops."))
print(json.dumps({"where": where, "found": found, "ops_modules": loaded}))
"""


@pytest.fixture(scope="module")
def probe() -> dict:
    """Where each op is registered, run in a fresh process importing only ember.ir."""
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def family_of(probe: dict) -> dict[str, str]:
    """op name -> family (the ir/ops module that registers it)."""
    return {op: module.rsplit(".", 1)[-1] for op, module in probe["where"].items()}


def _modules(layer: str) -> set[str]:
    return {p.stem for p in (PACKAGE / layer).glob("*.py")}


def _documented_families() -> dict[str, set[str]]:
    text = DOCS.read_text()
    section = text[text.index("## Op families") :]
    section = section[: section.index("\n## ", 1)]
    return {
        m.group(1): {op.strip() for op in m.group(2).split(",")}
        for m in re.finditer(r"^- (\w+) -> (.+)$", section, re.MULTILINE)
    }


@pytest.mark.parametrize("layer", sorted(NOT_FAMILIES))
def test_every_module_of_a_layer_is_a_family_or_a_declared_helper(layer: str) -> None:
    extra = _modules(layer) - set(FAMILIES) - NOT_FAMILIES[layer]
    assert not extra, f"{layer}: modules {sorted(extra)} are neither a family nor a helper"


def test_ir_ops_modules_are_exactly_the_families() -> None:
    assert _modules("ir/ops") - NOT_FAMILIES["ir/ops"] == set(FAMILIES)


@pytest.mark.parametrize("family", FAMILIES)
def test_family_has_its_file_in_every_layer(family: str) -> None:
    assert (PACKAGE / "ir" / "ops" / f"{family}.py").is_file()
    assert (PACKAGE / "ops" / f"{family}.py").is_file()
    assert (PACKAGE / "frontend" / "onnx" / f"{family}.py").is_file()
    for tests in ("ops", "frontend/onnx"):
        found = sorted((TESTS / tests).glob(f"test_{family}*.py"))
        assert found, f"family {family} has no tests/{tests}/test_{family}*.py"


@pytest.mark.parametrize("folder", ["ops", "frontend/onnx", "ir/ops", "e2e"])
def test_family_test_files_are_named_after_a_family(folder: str) -> None:
    allowed = NOT_FAMILY_TESTS.get(folder, set())
    bad = []
    for path in sorted((TESTS / folder).glob("test_*.py")):
        name = path.stem.removeprefix("test_")
        if folder == "e2e":
            if not name.startswith("ops_"):
                continue
            name = name.removeprefix("ops_")
        if name in allowed:
            continue
        if not any(name == f or name.startswith(f + "_") for f in FAMILIES):
            bad.append(path.name)
    assert not bad, f"tests/{folder}: {bad} are not named test_<family>[_...].py"


def test_get_op_finds_every_op_after_importing_only_ember_ir(probe: dict) -> None:
    assert sorted(probe["found"]) == sorted(list_ops())
    assert all(probe["found"][name] == name for name in probe["found"])
    assert "nn.conv_packed" in probe["found"] and "nn.conv_depthwise_packed" in probe["found"]
    assert probe["ops_modules"] == [], "importing ember.ir must not need ember.ops"


def test_every_op_is_defined_by_exactly_one_family_module(probe: dict) -> None:
    assert sorted(probe["where"]) == sorted(list_ops())
    prefix = "ember.ir.ops."
    outside = {op: m for op, m in probe["where"].items() if not m.startswith(prefix)}
    assert not outside, f"ops registered outside ember/ir/ops: {outside}"
    unknown = {op: m for op, m in probe["where"].items() if m[len(prefix) :] not in FAMILIES}
    assert not unknown, f"ops registered by a module that is not a family: {unknown}"


def test_docs_list_every_family_and_its_ops(family_of: dict[str, str]) -> None:
    documented = _documented_families()
    assert list(documented) == list(FAMILIES), "docs/ir.md lists other families"
    actual: dict[str, set[str]] = {f: set() for f in FAMILIES}
    for op, family in family_of.items():
        actual[family].add(op)
    for family in FAMILIES:
        assert documented[family] == actual[family], f"docs/ir.md: family {family}"


def test_computes_and_legalizers_live_in_their_family_module(family_of: dict[str, str]) -> None:
    assert all(has_compute(op) for op in family_of), "every op has a compute or a legalizer"
    bad = []
    for table in (COMPUTES, LEGALIZERS):
        for op in table.names():
            module = table.get(op).__module__
            if module != f"ember.ops.{family_of[op]}":
                bad.append(f"{table.what} of {op} in {module}, family {family_of[op]}")
    assert not bad, "\n".join(bad)


def test_onnx_handlers_live_in_a_family_module() -> None:
    bad = []
    for key in HANDLERS.names():
        for handler in HANDLERS.get(key).values():
            if not handler.fn.__module__.startswith("ember."):
                continue  # registered by a user (or another test), not built in
            module = handler.fn.__module__.removeprefix("ember.frontend.onnx.")
            if module not in FAMILIES and module not in {"constants", *FRONTEND_ONLY}:
                bad.append(f"{key} in {handler.fn.__module__}")
    assert not bad, f"ONNX handlers outside a family module: {bad}"
