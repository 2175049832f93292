"""The nn op family (convolutions, matrix products, pools, normalisations, image ops,
einsum, recurrent cells); importing this module registers all of them."""

from ember.ir.ops import einsum, nn_conv, nn_image, nn_norm, nn_pool, nn_rnn  # noqa: F401
