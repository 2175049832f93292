"""Imports every built-in op implementation module; each registers through register_*.

One line per family; a family adds its own line.
"""

import ember.ops.attention  # noqa: F401
import ember.ops.binary  # noqa: F401
import ember.ops.bitcast  # noqa: F401
import ember.ops.control  # noqa: F401
import ember.ops.einsum  # noqa: F401
import ember.ops.elemwise
import ember.ops.index  # noqa: F401
import ember.ops.linalg  # noqa: F401
import ember.ops.ml  # noqa: F401
import ember.ops.nn_conv  # noqa: F401
import ember.ops.nn_image  # noqa: F401
import ember.ops.nn_norm  # noqa: F401
import ember.ops.nn_pool  # noqa: F401
import ember.ops.nn_rnn  # noqa: F401
import ember.ops.nn_sample  # noqa: F401
import ember.ops.quant  # noqa: F401
import ember.ops.random  # noqa: F401
import ember.ops.reduce  # noqa: F401
import ember.ops.scan  # noqa: F401
import ember.ops.strings  # noqa: F401
import ember.ops.transform  # noqa: F401
