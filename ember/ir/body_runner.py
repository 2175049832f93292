"""How the references of control ops (``ember.ir.ops.control``) run their bodies.

Those op definitions cannot import the reference evaluator (``ir.op`` loads them, and the
evaluator needs ``ir.op``), so the evaluator registers itself here as ``"evaluate"``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ember.support.registry import Registry

#: runs a body (an ir Function) on numpy values, returning its flat outputs.
BodyRunner = Callable[[Any, Sequence[np.ndarray]], list[np.ndarray]]
#: body runners by name; ``ember.ir.evaluate`` registers ``"evaluate"``.
BODY_RUNNERS: Registry[BodyRunner] = Registry("control body runner")
