"""Composite targets: external kinds in front of a host."""

import pytest

import ember.backends.example_accel
import ember.backends.openblas  # noqa: F401 - registers the kind
from ember.errors import EmberValueError
from ember.target import Target


def test_string_and_list_forms_agree():
    a = Target("openblas, example_accel, c -opt-level=1")
    b = Target(["openblas", "example_accel"], host="c -opt-level=1")
    c = Target.create("openblas,example_accel,c -opt-level=1")
    assert a == b == c
    assert a.kind.name == "c" and a.attrs["opt-level"] == 1
    assert [t.kind.name for t in a.externals] == ["openblas", "example_accel"]
    assert str(a) == "openblas, example_accel, c -opt-level=1"
    assert Target.create(str(a)) == a


def test_list_without_host_defaults_to_c():
    assert Target.create(["openblas"]).kind.name == "c"


def test_external_lookup_and_options_keep_externals():
    t = Target("openblas, c")
    assert t.external("openblas") is t.externals[0]
    assert t.external("onednn") is None
    assert t.with_attrs({"opt-level": 1}).externals == t.externals


def test_plain_target_unchanged():
    t = Target("c")
    assert t.externals == () and str(t) == "c"


@pytest.mark.parametrize(
    "spec",
    ["openblas, openblas, c", "c, c", "openblas, , c"],
)
def test_bad_composites_are_refused(spec):
    with pytest.raises(EmberValueError):
        Target.create(spec)


def test_string_form_and_host_argument_conflict():
    with pytest.raises(EmberValueError, match="already names its host"):
        Target.create("openblas, c", host="llvm")
