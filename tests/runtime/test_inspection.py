"""The runtime's inspector registry: lookup order and the artifact table, without the tools."""

from __future__ import annotations

import subprocess
import sys

from ember.runtime.artifact import Artifact
from ember.runtime.artifact_set import ArtifactSet
from ember.runtime.inspection import (
    ANY,
    INSPECTORS,
    artifact_table,
    inspector_key,
    lookup_inspector,
    register_inspector,
)


def test_lookup_prefers_the_most_specific_key() -> None:
    art = Artifact("insp_test", "x", "a.insptest", b"data")
    keys = [("insp_test", ANY), (ANY, ".insptest"), ("insp_test", ".insptest")]
    try:
        for codegen_id, suffix in keys:
            register_inspector(codegen_id, suffix, lambda a, k=(codegen_id, suffix): str(k))
            found = lookup_inspector(art)
            assert found is not None and found(art) == str((codegen_id, suffix))
    finally:
        for codegen_id, suffix in keys:
            INSPECTORS.unregister(inspector_key(codegen_id, suffix))


def test_runtime_alone_has_no_builtin_inspectors() -> None:
    code = (
        "import sys\n"
        "from ember.runtime.artifact import Artifact\n"
        "from ember.runtime.inspection import lookup_inspector\n"
        "print(lookup_inspector(Artifact('c', 'native', 'lib0.c', b'int x;')),"
        " any(m.startswith('ember.tools.inspectors') for m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["None", "False"]


def test_artifact_set_inspect_is_the_table() -> None:
    arts = ArtifactSet([Artifact("c", "native", "lib0.c", b"int x;\n")])
    assert arts.inspect() == artifact_table(arts)
    assert arts.inspect().splitlines()[1].split()[:4] == ["c", "native", "lib0.c", "7"]
