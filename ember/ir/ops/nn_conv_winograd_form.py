"""Winograd F(m x m, r x r) transforms of ``nn.conv_winograd`` (ember.ir.ops.nn_conv): the
matrices, the build-time weight transform and packing, and the op's numpy reference.

F(m, r) computes m outputs of an r-tap correlation from a = m + r - 1 inputs with a
multiplies: ``y = A^T [(G g) * (B^T d)]``; in 2-D ``Y = A^T [(G g G^T) * (B^T d B)] A`` per
m x m tile (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks", 2016; TVM's
conv2d_winograd). F(2,3) interpolates at 0, 1, -1 (and infinity), F(4,3) at 0, +-1, +-2:
its larger coefficients (up to 8 in A^T, 1/24 in G) cost accuracy, see
ember.ops.nn_conv_winograd. F(4,2) (0, +-1, -2) serves stride-2 3x3 convolutions, which
are 2x2 ones of their input's four phases (``stride2_weight``).
"""

from __future__ import annotations

import numpy as np

#: output channels per block of the packed weight (one AVX-512 vector).
LANES = 16


#: the (m, r) of F(m x m, r x r) that ember_f32_winograd computes.
KINDS = ((2, 3), (4, 3), (4, 2))

#: the taps r per axis of the kernel a 3x3 convolution of this stride runs: a stride-2 one
#: is a 2x2 one of its input's phases (stride2_weight).
STRIDE_TAPS = {1: 3, 2: 2}


def winograd_matrices(m: int, r: int = 3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(B^T, G, A^T) of F(m x m, r x r) for (m, r) in KINDS, float64."""
    if (m, r) == (4, 2):
        # Toom-Cook at 0, 1, -1, -2 and infinity (G's rows: p^j / prod(p - q)): of the
        # choices with +-1/2 or 2 for -2, the smallest float32 error on random tiles
        bt = [
            [-2, -1, 2, 1, 0],
            [0, 2, 3, 1, 0],
            [0, -2, 1, 1, 0],
            [0, -1, 0, 1, 0],
            [0, -2, -1, 2, 1],
        ]
        g = [[-1 / 2, 0], [1 / 6, 1 / 6], [1 / 2, -1 / 2], [-1 / 6, 1 / 3], [0, 1]]
        at = [[1, 1, 1, 1, 0], [0, 1, -1, -2, 0], [0, 1, 1, 4, 0], [0, 1, -1, -8, 1]]
        return np.array(bt, float), np.array(g, float), np.array(at, float)
    if r != 3:
        raise ValueError(f"Winograd F({m},{r}): only {KINDS}")
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
    """The (O, C, r, r) weight (r = 3 or 2) as ``U = G g G^T`` (in float64, rounded once to
    float32), packed ``(P, Op / bw, C, bw)``: P = (m + r - 1)^2 points, Op =
    padded_channels(O) (zero filters after the O), bw = LANES x channel_blocks(Op)."""
    r = int(w.shape[-1])
    _, g, _ = winograd_matrices(m, r)
    o, c = w.shape[:2]
    if o % LANES:
        w = np.concatenate([w, np.zeros((padded_channels(o) - o, *w.shape[1:]), w.dtype)])
        o = w.shape[0]
    u = np.einsum("pi,ocij,qj->pqco", g, w.astype(np.float64), g)  # (a, a, C, O)
    bw = LANES * channel_blocks(o)
    a = m + r - 1
    u = u.reshape(a * a, c, o // bw, bw).transpose(0, 2, 1, 3)
    return np.ascontiguousarray(u.astype(np.float32))


def unpack_transformed(u: np.ndarray) -> np.ndarray:
    """``(P, C, O)`` float64 of a packed transformed weight."""
    p, blocks, c, bw = u.shape
    return u.astype(np.float64).transpose(0, 2, 1, 3).reshape(p, c, blocks * bw)


def winograd_reference(
    x: np.ndarray,
    u: np.ndarray,
    m: int,
    pads: tuple[int, int, int, int],
    out_hw: tuple[int, int],
    r: int = 3,
) -> np.ndarray:
    """The convolution of NHWC ``x`` by packed ``u`` (float64 transforms, float32 result):
    ``pads`` (top, left, bottom, right), ``out_hw`` the output's height and width, r x r
    taps."""
    bt, _, at = winograd_matrices(m, r)
    a = m + r - 1
    n, h, w, c = x.shape
    oh, ow = out_hw
    th, tw = -(-oh // m), -(-ow // m)
    xp = np.zeros((n, th * m + r - 1, tw * m + r - 1, c))
    top, left = pads[0], pads[1]
    rows, cols = min(h, th * m + r - 1 - top), min(w, tw * m + r - 1 - left)
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


def stride2_weight(w: np.ndarray, top: int, left: int) -> np.ndarray:
    """A stride-2 (O, C, 3, 3) convolution padded by (top, left) at the start as a stride-1
    2x2 one of its input's four phases: w2 (O, 4C, 2, 2), channel ``(2 dr + dc) C + c`` of
    the phase input being ``x[2 i + dr, 2 j + dc, c]`` (``space_to_depth``), padded as
    ``phase_padding`` says.

    Tap k of an axis reads ``x[2 i + k - pad]``: with ``k - pad = 2 s + d`` (d the phase)
    it is tap s - min(s) of the 2x2 kernel over phase d, whose padding is -min(s)."""
    o, c = w.shape[:2]
    w2 = np.zeros((o, 4, c, 2, 2), w.dtype)
    sy, sx = ([divmod(k - p, 2) for k in range(3)] for p in (top, left))
    ty, tx = min(s for s, _ in sy), min(s for s, _ in sx)
    for ky, (s, d) in enumerate(sy):
        for kx, (t, e) in enumerate(sx):
            w2[:, 2 * d + e, :, s - ty, t - tx] = w[:, :, ky, kx]
    return w2.reshape(o, 4 * c, 2, 2)


def phase_padding(
    pads: tuple[int, ...], hw: tuple[int, int], out_hw: tuple[int, int]
) -> tuple[int, int, int, int]:
    """(top, left, bottom, right) of the 2x2 convolution of the phases (``stride2_weight``)
    of a stride-2 3x3 one padded by ``pads`` over an even ``hw`` into ``out_hw``."""
    top, left = (pads[0] + 1) // 2, (pads[1] + 1) // 2
    return top, left, out_hw[0] - hw[0] // 2 - top + 1, out_hw[1] - hw[1] // 2 - left + 1


def space_to_depth(x: np.ndarray) -> np.ndarray:
    """The four phases of NHWC ``x`` (even height and width) as channels: (N, H/2, W/2, 4C),
    channel (2 dr + dc) C + c holding ``x[:, 2 i + dr, 2 j + dc, c]``."""
    n, h, w, c = x.shape
    blocks = x.reshape(n, h // 2, 2, w // 2, 2, c).transpose(0, 1, 3, 2, 4, 5)
    return blocks.reshape(n, h // 2, w // 2, 4 * c)
