"""The compiler driver: ``lower`` (stages 1-6) -> ``Lowered`` -> ``compile()``; ``build``
composes them in one call."""

from ember.driver.executor import EXECUTORS, Executor
from ember.driver.lowered import Lowered, generate_code
from ember.driver.pipeline import build, lower

__all__ = ["EXECUTORS", "Executor", "Lowered", "build", "generate_code", "lower"]
