"""Target parsing, defaults, hooks and the kind registry."""

import pytest

from ember.errors import EmberValueError, RegistryError
from ember.target import (
    Target,
    TargetKind,
    get_target_kind,
    list_target_kinds,
    register_target_kind,
)
from ember.target.kind import TARGET_KINDS


def test_parse_defaults_and_options():
    t = Target.create("c")
    assert t.kind.name == "c"
    assert t["opt-level"] == 3 and t["openmp"] is True and t["vector-math"] is True
    assert Target.create("c -vector-math=false")["vector-math"] is False
    t2 = Target.create("c -mcpu=skylake -opt-level=2 -openmp=false")
    assert t2["mcpu"] == "skylake" and t2["opt-level"] == 2 and t2["openmp"] is False
    assert str(t2) == "c -mcpu=skylake -openmp=false -opt-level=2"
    assert Target.create(str(t2)) == t2


def test_unknown_kind_names_known():
    with pytest.raises(RegistryError, match="unknown target kind 'cuda'.*known: c"):
        Target.create("cuda")


def test_bad_options():
    with pytest.raises(EmberValueError, match="unknown option -mattr.*known: .*-mcpu"):
        Target.create("c -mattr=+avx2")
    with pytest.raises(EmberValueError, match="as int"):
        Target.create("c -opt-level=high")
    with pytest.raises(EmberValueError, match="-name=value"):
        Target.create("c skylake")


def test_hooks_on_registered_kind():
    kind = TargetKind("test-woofles", hooks={"relay_to_tir": "target.woofles.lower"})
    register_target_kind(kind)
    try:
        t = Target.create("test-woofles")
        assert t.hook("relay_to_tir") == "target.woofles.lower"
        assert t.hook("tir_to_runtime") is None
        with pytest.raises(EmberValueError, match="unknown hook"):
            t.hook("relay_to_cuda")
        with pytest.raises(RegistryError, match="already registered"):
            register_target_kind(kind)
        assert "test-woofles" in list_target_kinds()
    finally:
        TARGET_KINDS.unregister("test-woofles")


def test_unknown_hook_name_rejected():
    with pytest.raises(EmberValueError, match="unknown hooks"):
        TargetKind("bad", hooks={"lower_everything": "x"})


def test_host_target():
    t = Target.create("c", host="c -opt-level=1")
    assert t.host is not None and t.host["opt-level"] == 1
    assert get_target_kind("c").device_type == 1
