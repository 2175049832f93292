; LLVM 22.1.0 (llvmlite 0.50.0) loop-vectorizer miscompile, reduced from ONNX Tile.
; dst[i] = src[4*k + i % 4] for i in [0, 16): the 4 floats at src[4*k] repeated 4 times.
; At -O3 with the loop unroller off (PipelineTuningOptions.loop_unrolling = false),
; InstCombine rewrites the index to `or disjoint i32 %base, (and i32 %i, 3)` and the loop
; vectorizer then loads two <8 x float> CONTIGUOUSLY from src + 4*k (it reads the index
; as %base + %i), so dst gets src[4k .. 4k+15] instead of the repeated pattern.
; LLVM 14.0.6 (opt -O3) leaves the loop scalar and correct. With
; !{!"llvm.loop.vectorize.enable", i1 false} on the loop (@tile_novec) the result is right.
define void @tile(ptr noalias %src, ptr noalias %dst, i32 %k) {
entry:
  %base = shl nuw nsw i32 %k, 2
  br label %loop
loop:
  %i = phi i32 [ 0, %entry ], [ %inext, %loop ]
  %r = srem i32 %i, 4
  %idx = add nsw i32 %base, %r
  %idx64 = sext i32 %idx to i64
  %ps = getelementptr inbounds float, ptr %src, i64 %idx64
  %v = load float, ptr %ps, align 4
  %i64 = sext i32 %i to i64
  %pd = getelementptr inbounds float, ptr %dst, i64 %i64
  store float %v, ptr %pd, align 4
  %inext = add nsw i32 %i, 1
  %c = icmp slt i32 %inext, 16
  br i1 %c, label %loop, label %exit
exit:
  ret void
}

define void @tile_novec(ptr noalias %src, ptr noalias %dst, i32 %k) {
entry:
  %base = shl nuw nsw i32 %k, 2
  br label %loop
loop:
  %i = phi i32 [ 0, %entry ], [ %inext, %loop ]
  %r = srem i32 %i, 4
  %idx = add nsw i32 %base, %r
  %idx64 = sext i32 %idx to i64
  %ps = getelementptr inbounds float, ptr %src, i64 %idx64
  %v = load float, ptr %ps, align 4
  %i64 = sext i32 %i to i64
  %pd = getelementptr inbounds float, ptr %dst, i64 %i64
  store float %v, ptr %pd, align 4
  %inext = add nsw i32 %i, 1
  %c = icmp slt i32 %inext, 16
  br i1 %c, label %loop, label %exit, !llvm.loop !0
exit:
  ret void
}

!0 = distinct !{!0, !1}
!1 = !{!"llvm.loop.vectorize.enable", i1 false}
