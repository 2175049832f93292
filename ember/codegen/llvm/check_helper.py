"""``ember_check_tensor`` in LLVM IR: the C back end's tensor argument check, word for word.

Checks packed argument ``index`` is a CPU DLTensor of the given rank, dtype, extents
(where ``shape[d] >= 0``) and element strides (compact row-major when ``strides`` is
NULL); otherwise it formats the same message as the C helper with ``snprintf``, sets it
as the last error and returns -1. ``ember_fail_nargs`` reports a wrong argument count.
"""

from __future__ import annotations

from ember.codegen.llvm.ir_text import ModuleContext

# Runtime type codes (runtime_api.h EmberTypeCode) and DLPack's kDLCPU.
TYPE_INT, TYPE_UINT, TYPE_FLOAT, TYPE_HANDLE, TYPE_NULL = 0, 1, 2, 3, 4
TYPE_DLTENSOR, TYPE_NDARRAY, DEVICE_CPU = 7, 13, 1
#: DLTensor {data, device {type, id}, ndim, dtype {code, bits, lanes}, shape, strides,
#: byte_offset}; LLVM lays it out for the target.
DLTENSOR = "{ ptr, { i32, i32 }, i32, { i8, i8, i16 }, ptr, ptr, i64 }"
CHECK = "ember_check_tensor"
SET_ERROR = "EmberAPISetLastError"

_FMT = {
    "tensor": "%s: argument %d (%s) must be a tensor, got type code %d",
    "null": "%s: argument %d (%s) is a NULL tensor",
    "ndim": "%s: argument %d (%s) must have %d dimensions, got %d",
    "dtype": "%s: argument %d (%s) must have dtype %s, got DLPack code %d bits %d lanes %d",
    "device": "%s: argument %d (%s) must be on the CPU, got device type %d",
    "dim": "%s: argument %d (%s) dimension %d must be %lld, got %lld",
    "stride": "%s: argument %d (%s) dimension %d must have stride %lld elements, got %lld",
    "data": "%s: argument %d (%s) has no data",
    "nargs": "%s: expected %d arguments, got %d",
}


def _declare_libc(ctx: ModuleContext) -> str:
    ctx.declare("snprintf", f"declare i32 @snprintf(ptr, {ctx.size_t}, ptr, ...)")
    ctx.declare(SET_ERROR, f"declare void @{SET_ERROR}(ptr)")
    return f"call i32 (ptr, {ctx.size_t}, ptr, ...) @snprintf(ptr %msg, {ctx.size_t} 512, ptr"


def check_helper(ctx: ModuleContext) -> None:
    """Define ``ember_check_tensor`` (and the argument-count failure) in this module."""
    if CHECK in ctx.helpers:
        return
    pf = _declare_libc(ctx)
    f = {k: ctx.string(v) for k, v in _FMT.items()}
    head = "ptr %fn, i32 %index, ptr %name"
    params = (
        f"{head}, ptr %args, ptr %tcodes, i32 %ndim, i8 %code, i8 %bits, ptr %dtype, "
        "ptr %shape, ptr %strides, ptr %out"
    )
    check = f"""define internal i32 @{CHECK}({params}) noinline nounwind {{
entry:
  %msg = alloca [512 x i8], align 1
  %tcp = getelementptr inbounds i32, ptr %tcodes, i32 %index
  %tc = load i32, ptr %tcp
  %is_dl = icmp eq i32 %tc, {TYPE_DLTENSOR}
  %is_nd = icmp eq i32 %tc, {TYPE_NDARRAY}
  %is_t = or i1 %is_dl, %is_nd
  br i1 %is_t, label %tensor, label %bad_tensor
bad_tensor:
  {pf} {f["tensor"]}, {head}, i32 %tc)
  br label %report
tensor:
  %ap = getelementptr inbounds i64, ptr %args, i32 %index
  %t = load ptr, ptr %ap
  %isnull = icmp eq ptr %t, null
  br i1 %isnull, label %bad_null, label %rank
bad_null:
  {pf} {f["null"]}, {head})
  br label %report
rank:
  %ndp = getelementptr inbounds {DLTENSOR}, ptr %t, i32 0, i32 2
  %tnd = load i32, ptr %ndp
  %ndok = icmp eq i32 %tnd, %ndim
  br i1 %ndok, label %dtype_check, label %bad_rank
bad_rank:
  {pf} {f["ndim"]}, {head}, i32 %ndim, i32 %tnd)
  br label %report
dtype_check:
  %cp = getelementptr inbounds {DLTENSOR}, ptr %t, i32 0, i32 3, i32 0
  %tcode = load i8, ptr %cp
  %bp = getelementptr inbounds {DLTENSOR}, ptr %t, i32 0, i32 3, i32 1
  %tbits = load i8, ptr %bp
  %lp = getelementptr inbounds {DLTENSOR}, ptr %t, i32 0, i32 3, i32 2
  %tlanes = load i16, ptr %lp
  %c1 = icmp eq i8 %tcode, %code
  %c2 = icmp eq i8 %tbits, %bits
  %c3 = icmp eq i16 %tlanes, 1
  %c12 = and i1 %c1, %c2
  %c123 = and i1 %c12, %c3
  br i1 %c123, label %device, label %bad_dtype
bad_dtype:
  %code32 = zext i8 %tcode to i32
  %bits32 = zext i8 %tbits to i32
  %lanes32 = zext i16 %tlanes to i32
  {pf} {f["dtype"]}, {head}, ptr %dtype, i32 %code32, i32 %bits32, i32 %lanes32)
  br label %report
device:
  %dp = getelementptr inbounds {DLTENSOR}, ptr %t, i32 0, i32 1, i32 0
  %dev = load i32, ptr %dp
  %devok = icmp eq i32 %dev, {DEVICE_CPU}
  br i1 %devok, label %dims, label %bad_device
bad_device:
  {pf} {f["device"]}, {head}, i32 %dev)
  br label %report
dims:
  %shp = getelementptr inbounds {DLTENSOR}, ptr %t, i32 0, i32 4
  %tshape = load ptr, ptr %shp
  br label %dim_loop
dim_loop:
  %d = phi i32 [ 0, %dims ], [ %dnext, %dim_next ]
  %dmore = icmp slt i32 %d, %ndim
  br i1 %dmore, label %dim_body, label %strides_start
dim_body:
  %wp = getelementptr inbounds i64, ptr %shape, i32 %d
  %want = load i64, ptr %wp
  %hp = getelementptr inbounds i64, ptr %tshape, i32 %d
  %has = load i64, ptr %hp
  %fixed = icmp sge i64 %want, 0
  %differ = icmp ne i64 %has, %want
  %bad = and i1 %fixed, %differ
  br i1 %bad, label %bad_dim, label %dim_next
dim_next:
  %dnext = add i32 %d, 1
  br label %dim_loop
bad_dim:
  {pf} {f["dim"]}, {head}, i32 %d, i64 %want, i64 %has)
  br label %report
strides_start:
  %stp = getelementptr inbounds {DLTENSOR}, ptr %t, i32 0, i32 5
  %tstrides = load ptr, ptr %stp
  %tnull = icmp eq ptr %tstrides, null
  %wnull = icmp eq ptr %strides, null
  %last = sub i32 %ndim, 1
  br label %stride_loop
stride_loop:
  %s = phi i32 [ %last, %strides_start ], [ %snext, %stride_next ]
  %expect = phi i64 [ 1, %strides_start ], [ %expect2, %stride_next ]
  %smore = icmp sge i32 %s, 0
  br i1 %smore, label %stride_body, label %data_check
stride_body:
  %tsp = getelementptr inbounds i64, ptr %tstrides, i32 %s
  br i1 %tnull, label %stride_a, label %stride_b
stride_b:
  %actual_b = load i64, ptr %tsp
  br label %stride_a
stride_a:
  %actual = phi i64 [ %expect, %stride_body ], [ %actual_b, %stride_b ]
  br i1 %wnull, label %stride_w, label %stride_wb
stride_wb:
  %wsp = getelementptr inbounds i64, ptr %strides, i32 %s
  %wanted_b = load i64, ptr %wsp
  br label %stride_w
stride_w:
  %wanted = phi i64 [ %expect, %stride_a ], [ %wanted_b, %stride_wb ]
  %ehp = getelementptr inbounds i64, ptr %tshape, i32 %s
  %ext = load i64, ptr %ehp
  %notone = icmp ne i64 %ext, 1
  %sdiff = icmp ne i64 %actual, %wanted
  %sbad = and i1 %notone, %sdiff
  br i1 %sbad, label %bad_stride, label %stride_next
stride_next:
  %expect2 = mul i64 %expect, %ext
  %snext = sub i32 %s, 1
  br label %stride_loop
bad_stride:
  {pf} {f["stride"]}, {head}, i32 %s, i64 %wanted, i64 %actual)
  br label %report
data_check:
  %datap = getelementptr inbounds {DLTENSOR}, ptr %t, i32 0, i32 0
  %data = load ptr, ptr %datap
  %nodata = icmp eq ptr %data, null
  %nonempty = icmp ne i64 %expect, 0
  %dbad = and i1 %nodata, %nonempty
  br i1 %dbad, label %bad_data, label %good
bad_data:
  {pf} {f["data"]}, {head})
  br label %report
good:
  store ptr %t, ptr %out
  ret i32 0
report:
  call void @{SET_ERROR}(ptr %msg)
  ret i32 -1
}}"""
    ctx.helpers[CHECK] = check
    nargs = "ptr %fn, i32 %want, i32 %got"
    ctx.helpers["ember_fail_nargs"] = f"""define internal i32 @ember_fail_nargs({nargs}) nounwind {{
entry:
  %msg = alloca [512 x i8], align 1
  {pf} {f["nargs"]}, ptr %fn, i32 %want, i32 %got)
  call void @{SET_ERROR}(ptr %msg)
  ret i32 -1
}}"""
