"""CPU records behind Target.keys and Target.cpu, and checked target options."""

import pytest

from ember.errors import EmberValueError
from ember.target import Target
from ember.target.cpu import ARM_NEON, GENERIC, X86_AVX2, X86_AVX512, cpu_info, host_cpu_info


@pytest.mark.parametrize(
    ("mcpu", "info"),
    [
        ("znver4", X86_AVX512),
        ("skylake-avx512", X86_AVX512),
        ("icelake-server", X86_AVX512),
        ("x86-64-v4", X86_AVX512),
        ("znver3", X86_AVX2),
        ("skylake", X86_AVX2),
        ("cortex-m55", ARM_NEON),
        ("neoverse-n1", ARM_NEON),
        ("armv8.2-a", ARM_NEON),
        ("pentium4", GENERIC),
    ],
)
def test_named_cpus(mcpu, info):
    assert cpu_info(mcpu) == info


def test_native_is_the_host_and_keys_end_in_cpu():
    assert cpu_info("native") == host_cpu_info()
    keys = Target.create("c").keys
    assert keys[-1] == "cpu" and keys[0] == host_cpu_info().key
    assert Target.create("c -mcpu=znver4").keys == ("x86-avx512", "x86", "cpu")
    assert X86_AVX512.lanes(32) == 16 and ARM_NEON.lanes(16) == 8


def test_with_attrs_types_and_checks_values():
    t = Target.create("c")
    assert t.with_attrs({"opt_level": 1})["opt-level"] == 1
    assert t.with_attrs({"openmp": "off"})["openmp"] is False
    with pytest.raises(EmberValueError, match="takes int"):
        t.with_attrs({"opt-level": "x" == "y"})
    with pytest.raises(EmberValueError, match="must be 0-3"):
        Target.create("c -opt-level=7")
    with pytest.raises(EmberValueError, match="not a CPU name"):
        Target.create("c '-mcpu=a;b'")
    with pytest.raises(EmberValueError, match="cannot be split"):
        Target.create("c -mcpu='unbalanced")
