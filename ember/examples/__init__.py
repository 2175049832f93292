"""Bundled example models and the demo behind ``make demo``."""

from pathlib import Path

#: the small CNN shipped with ember (regenerate with ``python -m ember.examples.make_example``).
EXAMPLE_MODEL: Path = Path(__file__).with_name("mnist_cnn.onnx")
