"""The MLPerf Tiny shapes: onnxruntime's results under the graph executor, bitwise the
same under the AOT executor and as a plain C program through the c interface."""

import numpy as np
import pytest
from test_aot_c_interface import run_standalone  # tests/executor is on pytest's pythonpath

import ember
from ember.examples.models import make_model
from ember.examples.tiny import TINY_MODELS
from ember.testing import run_onnxruntime

pytestmark = [pytest.mark.cc, pytest.mark.slow]
DEV = ember.cpu(0)


def _outputs(arts, inputs, aot: bool):
    top = ember.load_artifacts(arts, DEV)
    ex = (ember.AotExecutor if aot else ember.GraphExecutor)(
        top[top["get_metadata"]().mod_name](DEV)
    )
    ex.set_input(**inputs)
    ex.run()
    return [ex.get_output(i).numpy() for i in range(ex.get_num_outputs())]


@pytest.mark.parametrize("name", TINY_MODELS)
def test_tiny_model_all_executors(name, tmp_path):
    case = make_model(name)
    mod, params = ember.frontend.from_onnx(case.model, shape=case.shapes)
    graph = _outputs(ember.build(mod, "c", params), case.inputs, aot=False)
    want = run_onnxruntime(case.model, case.inputs)
    for got, ref in zip(graph, want, strict=True):
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)
    arts = ember.build(mod, "c", params, executor="aot -interface-api=c", mod_name="tiny")
    aot = _outputs(arts, case.inputs, aot=True)
    assert all(np.array_equal(a, g) for a, g in zip(aot, graph, strict=True))
    standalone = run_standalone(arts, "tiny", case.inputs, tmp_path)
    assert all(np.array_equal(a, g) for a, g in zip(standalone, graph, strict=True))
