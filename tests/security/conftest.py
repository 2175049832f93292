"""Security tests reuse the C test helper of tests/codegen (compile PrimFuncs, load them)."""

from __future__ import annotations

import sys
from pathlib import Path

_CODEGEN = Path(__file__).parent.parent / "codegen"
if str(_CODEGEN) not in sys.path:
    sys.path.insert(0, str(_CODEGEN))
