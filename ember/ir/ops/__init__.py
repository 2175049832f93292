"""Built-in operator definitions, one file per op family; importing this package registers
them through the public ``register_op``. Each family adds one import line here."""
from ember.ir.ops import (
    binary,  # noqa: F401
    elemwise,  # noqa: F401
    index,  # noqa: F401
    nn,  # noqa: F401
    reduce,  # noqa: F401
    scan,  # noqa: F401
    scatter,  # noqa: F401
    transform,  # noqa: F401
)
