"""Built-in operator definitions, one file per op family; importing this package registers
them through the public ``register_op``. Each family adds one import line here."""
from ember.ir.ops import binary  # noqa: F401
from ember.ir.ops import elemwise  # noqa: F401
from ember.ir.ops import reduce  # noqa: F401
from ember.ir.ops import transform  # noqa: F401
from ember.ir.ops import nn  # noqa: F401
from ember.ir.ops import index  # noqa: F401
from ember.ir.ops import scan  # noqa: F401
from ember.ir.ops import scatter  # noqa: F401
