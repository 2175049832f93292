"""Winograd F(m x m, 3 x 3) transforms of ``nn.conv_winograd`` (ember.ir.ops.nn_conv): the
matrices, the build-time weight transform and packing, and the op's numpy reference.

F(m, 3) computes m outputs of a 3-tap correlation from a = m + 2 inputs with a multiplies:
``y = A^T [(G g) * (B^T d)]``; in 2-D ``Y = A^T [(G g G^T) * (B^T d B)] A`` per m x m tile
(Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks", 2016; TVM's
conv2d_winograd). F(2,3) interpolates at 0, 1, -1 (and infinity), F(4,3) at 0, +-1, +-2:
its larger coefficients (up to 8 in A^T, 1/24 in G) cost accuracy, see
ember.ops.nn_conv_winograd.
"""

from __future__ import annotations

import numpy as np

#: output channels per block of the packed weight (one AVX-512 vector).
LANES = 16


def winograd_matrices(m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(B^T, G, A^T) of F(m x m, 3 x 3) for m = 2 or 4, float64."""
    if m == 2:
        bt = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]
        g = [[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]]
        at = [[1, 1, 1, 0], [0, 1, -1, -1]]
    elif m == 4:
        bt = [
            [4, 0, -5, 0, 1, 0],
            [0, -4, -4, 1, 1, 0],
            [0, 4, -4, -1, 1, 0],
            [0, -2, -1, 2, 1, 0],
            [0, 2, -1, -2, 1, 0],
            [0, 4, 0, -5, 0, 1],
        ]
        g = [
            [1 / 4, 0, 0],
            [-1 / 6, -1 / 6, -1 / 6],
            [-1 / 6, 1 / 6, -1 / 6],
            [1 / 24, 1 / 12, 1 / 6],
            [1 / 24, -1 / 12, 1 / 6],
            [0, 0, 1],
        ]
        at = [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]]
    else:
        raise ValueError(f"Winograd tile m={m}: only 2 and 4")
    return np.array(bt, float), np.array(g, float), np.array(at, float)


def channel_blocks(out_channels: int) -> int:
    """Blocks of LANES output channels per packed weight block: 4 or 2 when they divide.

    Four blocks load a V value once for 4 products where two load it for 2: the products
    of resnet8's 8x8x64 layer (4 tiles) took 0.87x the time, ResNet-50's 3x3 layers
    0.97-0.98x (one thread, a C harness of ember_f32_winograd)."""
    for nb in (4, 2):
        if out_channels % (nb * LANES) == 0:
            return nb
    return 1


def padded_channels(out_channels: int) -> int:
    """The output channels rounded up to a multiple of LANES (the kernel's blocks)."""
    return -(-out_channels // LANES) * LANES


def transform_weight(w: np.ndarray, m: int) -> np.ndarray:
    """The (O, C, 3, 3) weight as ``U = G g G^T`` (in float64, rounded once to float32),
    packed ``(P, Op / bw, C, bw)``: P = (m + 2)^2 points, Op = padded_channels(O) (zero
    filters after the O), bw = LANES x channel_blocks(Op)."""
    _, g, _ = winograd_matrices(m)
    o, c = w.shape[:2]
    if o % LANES:
        w = np.concatenate([w, np.zeros((padded_channels(o) - o, *w.shape[1:]), w.dtype)])
        o = w.shape[0]
    u = np.einsum("pi,ocij,qj->pqco", g, w.astype(np.float64), g)  # (a, a, C, O)
    bw = LANES * channel_blocks(o)
    a = m + 2
    u = u.reshape(a * a, c, o // bw, bw).transpose(0, 2, 1, 3)
    return np.ascontiguousarray(u.astype(np.float32))


def unpack_transformed(u: np.ndarray) -> np.ndarray:
    """``(P, C, O)`` float64 of a packed transformed weight."""
    p, blocks, c, bw = u.shape
    return u.astype(np.float64).transpose(0, 2, 1, 3).reshape(p, c, blocks * bw)


def winograd_reference(
    x: np.ndarray, u: np.ndarray, m: int, pads: tuple[int, int, int, int], out_hw: tuple[int, int]
) -> np.ndarray:
    """The convolution of NHWC ``x`` by packed ``u`` (float64 transforms, float32 result):
    ``pads`` (top, left, bottom, right), ``out_hw`` the output's height and width."""
    bt, _, at = winograd_matrices(m)
    a = m + 2
    n, h, w, c = x.shape
    oh, ow = out_hw
    th, tw = -(-oh // m), -(-ow // m)
    xp = np.zeros((n, th * m + 2, tw * m + 2, c))
    top, left = pads[0], pads[1]
    rows, cols = min(h, th * m + 2 - top), min(w, tw * m + 2 - left)
    xp[:, top : top + rows, left : left + cols] = x[:, :rows, :cols]
    uu = unpack_transformed(u).reshape(a, a, c, -1)
    y = np.zeros((n, th * m, tw * m, uu.shape[-1]))
    for i in range(th):
        for j in range(tw):
            d = xp[:, i * m : i * m + a, j * m : j * m + a]  # (n, a, a, c)
            v = np.einsum("pi,nijc,qj->npqc", bt, d, bt)
            mm = np.einsum("npqc,pqco->npqo", v, uu)
            y[:, i * m : (i + 1) * m, j * m : (j + 1) * m] = np.einsum(
                "ip,npqo,jq->nijo", at, mm, at
            )
    return y[:, :oh, :ow].astype(np.float32)
