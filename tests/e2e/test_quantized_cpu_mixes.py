"""Quantized models compiled for x86 CPUs with some of the AVX-512 extensions the int8
kernels use and not the others, equal the AVX2 build bit for bit.

The int8 kernels pick their code by the compiler's feature macros: ``vpdpbusd`` zmm tiles
where ``__AVX512VNNI__`` (int8_avx512.py), one ``vpermb`` per panel step of the patch
packing where ``__AVX512VBMI__`` (int8_kernels.py), compress stores where
``__AVX512VBMI2__`` (int8_dwconv_add.py), and AVX-512BW-only depthwise rows. Each mix below
is a real CPU's set: Skylake-SP has AVX-512BW without VNNI or VBMI, Cascade Lake adds VNNI
but no VBMI, Ice Lake server has all of them, x86-64-v4 is the AVX-512 baseline (F, BW,
CD, DQ, VL). They all run on an AVX-512 VNNI host (skipped elsewhere); each must give the
AVX2 tiles' bytes, since every path computes the same int32 sums and requantizes them in
the same float32 order.
"""

from __future__ import annotations

import numpy as np
import pytest

from ember.examples.models import make_model
from ember.runtime.cpu_features import host_features
from ember.runtime.threads import num_threads
from ember.testing import run_onnx_compiled
from ember.testing.quantize import quantize_static

pytestmark = [pytest.mark.cc, pytest.mark.slow]

#: AVX2 without AVX-512 (Zen 3): the reference build
AVX2 = "c -mcpu=znver3"
#: the AVX-512 mixes: name -> target
MIXES = {
    "skylake-avx512 (BW, no VNNI, no VBMI)": "c -mcpu=skylake-avx512",
    "cascadelake (VNNI, no VBMI)": "c -mcpu=cascadelake",
    "icelake-server (VNNI, VBMI, VBMI2)": "c -mcpu=icelake-server",
    "x86-64-v4 (the AVX-512 baseline)": "c -mcpu=x86-64-v4",
}
HAS_VNNI512 = {"avx512_vnni", "avx512vbmi", "avx512_vbmi2", "avx512bw", "avx512vl"} <= (
    host_features()
)


@pytest.mark.skipif(not HAS_VNNI512, reason="the host cannot run every mix's code")
@pytest.mark.parametrize("name", ["resnet8", "mobilenet_v2_64_w0.35"])
def test_avx512_feature_mixes_equal_the_avx2_build(name: str) -> None:
    """Static QDQ ResNet-8 and a small MobileNetV2 (convs, depthwise, adds, dense)."""
    case = make_model(name)
    quantized = quantize_static(case.model, case.inputs)
    with num_threads(1):
        want = run_onnx_compiled(quantized, case.inputs, target=AVX2)
        for mix, target in MIXES.items():
            got = run_onnx_compiled(quantized, case.inputs, target=target)
            for g, w in zip(got, want, strict=True):
                np.testing.assert_array_equal(g, w, err_msg=mix)
