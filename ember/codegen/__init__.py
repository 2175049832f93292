"""ember.codegen: loop IR -> Artifacts. ``codegen.c`` emits C99 sources for the host CPU.

Each backend lives in its own sub-package and returns ``ember.runtime.Artifact`` values;
the runtime's loading process decides how to link and load them.
"""

from __future__ import annotations
