"""C source of ``ember_q8_matmul_integer`` and ``ember_q8_conv_integer``: MatMulInteger and
ConvInteger of 8-bit data by a constant int8 weight on the ``vpmaddubsw`` tiles and drivers
of ``int8_conv.py``, int32 out.

Dynamically quantized models (``onnxruntime.quantization.quantize_dynamic``) quantize the
activations at run time (DynamicQuantizeLinear), so the data's zero point is a tensor, not
a constant, and the product leaves the kernel as int32 (a Cast and a Mul by the scales
follow). The weight is packed at build time in the dense panel layout
(``[N/16][K/4][16][4]``) with its column sums; per call the kernel makes the data rows
unsigned (top bit flipped for int8 data, the zero point with them), computes
``-zero_point * colsum[n]`` once, and runs the dense driver with that as the bias and
int32 stores::

    sum_k (x_k - zx) * w_kn = sum_k xu_k * w_kn - zxu * colsum_n

exact in int32 (the compiler takes this path only for weights whose ``vpmaddubsw`` pair
sums cannot saturate). The weight panels are split across the runtime's threads. The
convolution is the same with the weight's row sums (output channels) and the image padded
with the data's zero point (so padding adds nothing after the correction).
"""

from __future__ import annotations

INT8_DYNAMIC_C = r"""
static inline int32_t ember_q8_matmul_integer(const void* x_, const void* zp_, const void* w_,
                                              const int32_t* colsum, void* y_, void* scratch,
                                              int32_t R, int32_t K, int32_t N, int32_t flip) {
  const int k4 = (K + 3) / 4, ldr = 4 * k4, R4 = (R + 3) / 4 * 4, npan = (N + 15) / 16;
  const int32_t zpu = (int32_t)(((const uint8_t*)zp_)[0] ^ (uint8_t)flip);
  uint8_t* xr = (uint8_t*)scratch;
  int32_t* corr = (int32_t*)(xr + (long)R4 * ldr);
  ember_q8_unsigned_rows((const uint8_t*)x_, R, R4, K, ldr, (uint8_t)flip, xr);
  for (int n = 0; n < 16 * npan; ++n) corr[n] = -zpu * colsum[n];
  ember_q8_dense_job job = {xr, (const uint8_t*)w_, corr, NULL, NULL, NULL, (int32_t*)y_,
                            R, N, k4};
  const int par = EmberBackendGetNumThreads() > 1 && (long)R * K * N >= EMBER_Q8_PAR_MACS;
  return EmberBackendParallelFor(ember_q8_dense_range, &job, npan, par ? 1 : npan, 0) == 0 ? 0
                                                                                          : -1;
}

/* ConvInteger, ungrouped: the requantizing convolution's driver with int32 stores, the
   padding the data's zero point, the bias -zero_point * rowsum (first in the scratch) */
static inline int32_t ember_q8_conv_integer(const void* x_, const void* zp_, const void* w_,
                                            const int32_t* rowsum, void* y_, void* scratch,
                                            int32_t N, int32_t C, int32_t H, int32_t W,
                                            int32_t M, int32_t KH, int32_t KW, int32_t OH,
                                            int32_t OW, int32_t sh, int32_t sw, int32_t ph,
                                            int32_t pw, int32_t dh, int32_t dw, int32_t flip,
                                            int32_t chunk, int32_t nfix) {
  const uint8_t zp = ((const uint8_t*)zp_)[0];
  const int32_t zpu = (int32_t)(zp ^ (uint8_t)flip);
  int32_t* bias = (int32_t*)scratch;
  for (int m = 0; m < M; ++m) bias[m] = -zpu * rowsum[m];
  uint8_t* rest = (uint8_t*)scratch + ((size_t)M * 4 + 63) / 64 * 64;
  return ember_q8_conv_impl(x_, w_, bias, NULL, NULL, (int32_t*)y_, rest, N, C, H, W, M, KH, KW,
                            OH, OW, sh, sw, ph, pw, dh, dw, zp, flip, 0, 0, 0, chunk, nfix);
}
"""
