"""The nn op family (convolutions, matrix products, pools, normalisations, image ops,
einsum, recurrent cells); importing this module registers all of them."""

from ember.ir.ops import nn_conv, nn_einsum, nn_image, nn_norm, nn_pool, nn_rnn  # noqa: F401
