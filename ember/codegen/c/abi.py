"""The C ABI of generated kernels, described once: type mapping, names, the packed wrapper.

Every kernel ``f`` becomes two C functions:

* ``static int32_t <sym>_unpacked(float* restrict A, ..., int32_t n)`` - raw typed pointers
  and scalars (the AOT ``unpacked`` convention); returns 0, or -1 after
  ``EmberAPISetLastError``.
* ``EMBER_DLL int32_t <sym>(EmberValue* args, int32_t* type_codes, int32_t num_args,
  EmberValue* out_ret_value, int32_t* out_ret_tcode, void* resource_handle)`` - the packed
  entry point. It checks the argument count, every type code, and for each tensor its
  ndim, dtype, device, compactness and static extents, binding symbolic extents; on a
  mismatch it reports a clear error and returns -1 instead of touching memory.

Symbols are ``SYMBOL_PREFIX + name`` (names already carrying the prefix keep it).
"""

from __future__ import annotations

from ember.errors import CompileError
from ember.support import dtypes
from ember.tir import dtype as dt
from ember.tir.buffer import Buffer
from ember.tir.expr import IntImm, Var
from ember.tir.pools import pool_param_bytes
from ember.tir.stmt import PrimFunc

SYMBOL_PREFIX = "ember_"
UNPACKED_SUFFIX = "_unpacked"
RUNTIME_HEADER = "ember/runtime_api.h"

# Runtime type codes (runtime_api.h EmberTypeCode).
TYPE_INT = 0
TYPE_UINT = 1
TYPE_FLOAT = 2
TYPE_HANDLE = 3
TYPE_NULL = 4
TYPE_DLTENSOR = 7
TYPE_NDARRAY = 13
DEVICE_CPU = 1

_C_RESERVED = (
    "auto break case char const continue default do double else enum extern float for "
    "goto if inline int long register restrict return short signed sizeof static struct "
    "switch typedef union unsigned void volatile while _Bool _Complex _Imaginary _Alignas "
    "_Alignof _Atomic _Generic _Noreturn _Static_assert _Thread_local bool true false NULL "
    "main errno snprintf INFINITY NAN args type_codes num_args out_ret_value out_ret_tcode "
    "resource_handle msg"
)
#: <math.h> functions; each also has float (``f``) and long double (``l``) versions.
_LIBM = (
    "acos acosh asin asinh atan atan2 atanh cbrt ceil copysign cos cosh erf erfc exp "
    "exp10 exp2 expm1 fabs fdim floor fma fmax fmin fmod frexp hypot ilogb ldexp lgamma "
    "llrint llround log log10 log1p log2 logb lrint lround modf nan nearbyint nextafter "
    "nexttoward pow remainder remquo rint round scalbln scalbn sin sincos sinh sqrt tan "
    "tanh tgamma trunc"
)
LIBM_FUNCTIONS: tuple[str, ...] = tuple(_LIBM.split())
_OTHER_LIBC = (
    "HUGE_VAL HUGE_VALF isfinite isinf isnan isnormal signbit fpclassify M_PI M_E "
    "memcpy memset memmove malloc calloc realloc free abort exit abs labs printf fprintf "
    "puts stderr stdout size_t int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t "
    "uint64_t intptr_t uintptr_t INT64_C UINT64_C INT64_MIN INT64_MAX INT32_MIN INT32_MAX "
    "DLTensor DLDevice DLDataType kDLCPU EmberValue EMBER_DLL EmberAPISetLastError "
    "EmberBackendAllocWorkspace EmberBackendFreeWorkspace EmberBackendGetNumThreads "
    "EmberBackendGetFuncFromEnv EmberFuncCall EmberFunctionHandle __ember_module_ctx"
)
#: Identifiers a generated variable or buffer must never take: C keywords, libc and libm
#: names (a buffer called ``tan`` would shadow the function), the runtime API and the
#: packed wrapper's parameters.
C_KEYWORDS: tuple[str, ...] = (
    *_C_RESERVED.split(),
    *_OTHER_LIBC.split(),
    *LIBM_FUNCTIONS,
    *(name + "f" for name in LIBM_FUNCTIONS),
    *(name + "l" for name in LIBM_FUNCTIONS),
)


#: the C storage type of the floats narrower than float32, by bits (their values compute
#: as float: ``half``).
HALF_STORAGE = {16: "uint16_t", 8: "uint8_t"}


def c_type(dtype: str, where: str = "") -> str:
    """The C type of a scalar dtype in memory (bool is uint8_t, float16/bfloat16 and the
    float8s their bits as uint16_t/uint8_t)."""
    if dt.lanes_of(dtype) != 1:
        raise CompileError(
            f"C codegen{where}: vector dtype {dtype} is not supported yet; "
            "use a vectorized loop (ForKind.VECTORIZED) instead of Ramp/Broadcast"
        )
    info = dtypes.lookup(dtype)
    if info is not None and dtypes.is_half(dtype):
        return HALF_STORAGE[info.bits]
    if info is None or info.c_type is None:
        raise CompileError(
            f"C codegen{where}: dtype {dtype} is not supported by the C backend; "
            f"cast to one of {', '.join(d for d in dtypes.TENSOR_DTYPES)} first"
        )
    return info.c_type


def dtype_suffix(dtype: str) -> str:
    """The short type tag of helper names: ``f32``, ``i64``, ``u8``."""
    base = dt.element_of(dtype)
    if base.startswith("float8_"):
        return "f8" + base.removeprefix("float8_")
    return {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16"}.get(
        base, base.replace("int", "i").replace("ui", "u")
    )


def symbol_name(func: PrimFunc | str) -> str:
    """The exported C symbol of a kernel: its name with the ``ember_`` prefix."""
    name = func if isinstance(func, str) else func.name
    if not name.isidentifier() or not name.isascii():
        raise CompileError(f"kernel name {name!r} is not a valid C identifier")
    return name if name.startswith(SYMBOL_PREFIX) else SYMBOL_PREFIX + name


def c_string(text: str) -> str:
    """A C string literal of ``text`` (printable ASCII kept, everything else escaped)."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif " " <= ch <= "~" and ch != "?":
            out.append(ch)
        else:
            for byte in ch.encode():
                out.append(f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


CHECK_HELPER = r"""
/* Checks packed argument `index` is a CPU DLTensor of the given rank, dtype, extents
 * (where shape[d] >= 0) and element strides (compact row-major when strides is NULL);
 * reports what is wrong otherwise. */
static int32_t ember_check_tensor(const char* fn, int32_t index, const char* name,
                                  const EmberValue* args, const int32_t* type_codes,
                                  int32_t ndim, uint8_t code, uint8_t bits,
                                  const char* dtype, const int64_t* shape,
                                  const int64_t* strides, DLTensor** out) {
  char msg[512];
  int32_t tc = type_codes[index];
  if (tc != EMBER_DLTENSOR_HANDLE && tc != EMBER_NDARRAY_HANDLE) {
    snprintf(msg, sizeof(msg), "%s: argument %d (%s) must be a tensor, got type code %d",
             fn, (int)index, name, (int)tc);
    EmberAPISetLastError(msg);
    return -1;
  }
  DLTensor* t = (DLTensor*)args[index].v_handle;
  if (t == NULL) {
    snprintf(msg, sizeof(msg), "%s: argument %d (%s) is a NULL tensor", fn, (int)index, name);
    EmberAPISetLastError(msg);
    return -1;
  }
  if (t->ndim != ndim) {
    snprintf(msg, sizeof(msg), "%s: argument %d (%s) must have %d dimensions, got %d", fn,
             (int)index, name, (int)ndim, (int)t->ndim);
    EmberAPISetLastError(msg);
    return -1;
  }
  if (t->dtype.code != code || t->dtype.bits != bits || t->dtype.lanes != 1) {
    snprintf(msg, sizeof(msg),
             "%s: argument %d (%s) must have dtype %s, got DLPack code %d bits %d lanes %d",
             fn, (int)index, name, dtype, (int)t->dtype.code, (int)t->dtype.bits,
             (int)t->dtype.lanes);
    EmberAPISetLastError(msg);
    return -1;
  }
  if (t->device.device_type != kDLCPU) {
    snprintf(msg, sizeof(msg), "%s: argument %d (%s) must be on the CPU, got device type %d",
             fn, (int)index, name, (int)t->device.device_type);
    EmberAPISetLastError(msg);
    return -1;
  }
  for (int32_t d = 0; d < ndim; ++d) {
    if (shape[d] >= 0 && t->shape[d] != shape[d]) {
      snprintf(msg, sizeof(msg), "%s: argument %d (%s) dimension %d must be %lld, got %lld",
               fn, (int)index, name, (int)d, (long long)shape[d], (long long)t->shape[d]);
      EmberAPISetLastError(msg);
      return -1;
    }
  }
  int64_t expect_stride = 1;
  for (int32_t d = ndim - 1; d >= 0; --d) {
    int64_t actual = t->strides != NULL ? t->strides[d] : expect_stride;
    int64_t wanted = strides != NULL ? strides[d] : expect_stride;
    if (t->shape[d] != 1 && actual != wanted) {
      snprintf(msg, sizeof(msg),
               "%s: argument %d (%s) dimension %d must have stride %lld elements, got %lld",
               fn, (int)index, name, (int)d, (long long)wanted, (long long)actual);
      EmberAPISetLastError(msg);
      return -1;
    }
    expect_stride *= t->shape[d];
  }
  if (t->data == NULL && expect_stride != 0) {
    snprintf(msg, sizeof(msg), "%s: argument %d (%s) has no data", fn, (int)index, name);
    EmberAPISetLastError(msg);
    return -1;
  }
  *out = t;
  return 0;
}
"""


def _fail(text: str) -> list[str]:
    return [f"    EmberAPISetLastError({c_string(text)});", "    return -1;"]


def packed_wrapper(func: PrimFunc, names: dict[int, str]) -> str:
    """The packed entry point of ``func``; ``names`` maps id(param) -> its C name."""
    sym = symbol_name(func)
    n = len(func.params)
    lines = [
        f"EMBER_DLL int32_t {sym}(EmberValue* args, int32_t* type_codes, int32_t num_args,",
        f"{' ' * (len(sym) + 19)}EmberValue* out_ret_value, int32_t* out_ret_tcode,",
        f"{' ' * (len(sym) + 19)}void* resource_handle) {{",
        "  (void)out_ret_value;",
        "  (void)out_ret_tcode;",
        "  (void)resource_handle;",
        f"  if (num_args != {n}) {{",
        "    char msg[256];",
        f'    snprintf(msg, sizeof(msg), "{sym}: expected {n} arguments, got %d", (int)num_args);',
        "    EmberAPISetLastError(msg);",
        "    return -1;",
        "  }",
    ]
    call_args: list[str] = []
    bound: dict[Var, str] = {}
    pools = pool_param_bytes(func)
    for k, p in enumerate(func.params):
        if isinstance(p, Buffer):
            lines += _tensor_arg(sym, k, p, names[id(p)], bound)
            ctype = c_type(p.dtype, f" of '{func.name}'")
            call_args.append(f"({ctype}*)((char*)t{k}->data + t{k}->byte_offset)")
        elif p.name in pools:
            lines += _pool_arg(sym, k, p, pools[p.name])
            call_args.append(f"s{k}")
        else:
            lines += _scalar_arg(sym, k, p, names[id(p)])
            bound.setdefault(p, f"s{k}")
            call_args.append(f"s{k}")
    for k, p in enumerate(func.params):  # scalar params that are also extents must agree
        if isinstance(p, Var) and dt.is_integral(p.dtype):
            for j, q in enumerate(func.params):
                if isinstance(q, Buffer):
                    for d, e in enumerate(q.shape):
                        if e is p:
                            lines += [
                                f"  if ((int64_t)s{k} != t{j}->shape[{d}]) {{",
                                *_fail(
                                    f"{sym}: argument {k} ({p.name}) does not match "
                                    f"dimension {d} of argument {j} ({q.name})"
                                ),
                                "  }",
                            ]
    sym_vars = [v for v in bound if isinstance(v, Var) and not any(v is p for p in func.params)]
    extra = [f"({c_type(v.dtype)}){bound[v]}" for v in sym_vars]
    joined = ",\n      ".join(call_args + extra)
    lines.append(
        f"  return {sym}{UNPACKED_SUFFIX}(\n      {joined});"
        if joined
        else f"  return {sym}{UNPACKED_SUFFIX}();"
    )
    lines.append("}")
    return "\n".join(lines) + "\n"


def symbolic_extents(func: PrimFunc) -> list[Var]:
    """Extent variables of buffer parameters that are not themselves parameters (in order)."""
    out: list[Var] = []
    for p in func.params:
        if isinstance(p, Buffer):
            for e in p.shape:
                if isinstance(e, Var) and e not in out and not any(e is q for q in func.params):
                    out.append(e)
    return out


def _tensor_arg(sym: str, k: int, b: Buffer, cname: str, bound: dict[Var, str]) -> list[str]:
    code, bits, _ = dt.dlpack_code(b.dtype)
    dims = []
    for e in b.shape:
        if isinstance(e, IntImm):
            dims.append(str(e.value))
        elif isinstance(e, Var):
            dims.append("-1")
        else:
            raise CompileError(
                f"C codegen: parameter {b.name} of '{sym}' has extent {e}; extents must be "
                "constants or plain variables"
            )
    shape = ", ".join(dims) if dims else "0"
    lines = [f"  static const int64_t shape{k}[{max(len(dims), 1)}] = {{{shape}}};"]
    strides = "NULL"
    if b.strides:
        if not all(isinstance(e, IntImm) for e in b.strides):
            raise CompileError(
                f"C codegen: parameter {b.name} of '{sym}' has symbolic strides; only "
                "constant strides can be checked at the call boundary"
            )
        listed = ", ".join(str(e.value) for e in b.strides)  # type: ignore[attr-defined]
        lines.append(f"  static const int64_t strides{k}[{len(b.strides)}] = {{{listed}}};")
        strides = f"strides{k}"
    lines += [
        f"  DLTensor* t{k} = NULL;",
        f'  if (ember_check_tensor("{sym}", {k}, {c_string(b.name)}, args, type_codes, '
        f'{len(b.shape)}, {code}, {bits}, "{b.dtype}", shape{k}, {strides}, &t{k}) != 0) {{',
        "    return -1;",
        "  }",
    ]
    for d, e in enumerate(b.shape):
        if not isinstance(e, Var):
            continue
        if e in bound:
            lines += [
                f"  if (t{k}->shape[{d}] != (int64_t){bound[e]}) {{",
                *_fail(
                    f"{sym}: dimension {d} of argument {k} ({b.name}) must equal "
                    f"'{e.name}' bound earlier"
                ),
                "  }",
            ]
        else:
            bound[e] = f"t{k}->shape[{d}]"
    del cname
    return lines


def pool_too_small(where: str, need: int) -> str:
    """The error of a pool argument shorter than the kernel's plan (both back ends)."""
    return (
        f"{where} holds fewer than the {need} bytes the kernel needs; the size came from the "
        "model's graph or metadata file: rebuild the model or restore those files"
    )


def _pool_arg(sym: str, k: int, v: Var, need: int) -> list[str]:
    """A pool parameter (planned scratch or workspace) of at least ``need`` bytes: a uint8
    tensor whose length is checked, or a non-NULL raw pointer from native code (a run
    function, a C program) that sized it from the same plan."""
    where = f"{sym}: argument {k} ({v.name})"
    return [
        f"  void* s{k} = NULL;",
        f"  if (type_codes[{k}] == EMBER_OPAQUE_HANDLE) {{",
        f"    s{k} = args[{k}].v_handle;",
        f"    if (s{k} == NULL) {{",
        *("  " + line for line in _fail(f"{where} is NULL; it needs {need} bytes")),
        "    }",
        "  } else {",
        f"    static const int64_t pool{k}[1] = {{-1}};",
        f"    DLTensor* t{k} = NULL;",
        f'    if (ember_check_tensor("{sym}", {k}, {c_string(v.name)}, args, type_codes, 1, '
        f'kDLUInt, 8, "uint8", pool{k}, NULL, &t{k}) != 0) {{',
        "      return -1;",
        "    }",
        f"    if (t{k}->shape[0] < {need}) {{",
        *("  " + line for line in _fail(pool_too_small(where, need))),
        "    }",
        f"    s{k} = (char*)t{k}->data + t{k}->byte_offset;",
        "  }",
    ]


def _scalar_arg(sym: str, k: int, v: Var, cname: str) -> list[str]:
    del cname
    where = f"{sym}: argument {k} ({v.name})"
    if dt.is_handle(v.dtype):
        return [
            f"  void* s{k} = NULL;",
            f"  if (type_codes[{k}] == EMBER_OPAQUE_HANDLE || type_codes[{k}] == EMBER_NULL) {{",
            f"    s{k} = args[{k}].v_handle;",
            f"  }} else if (type_codes[{k}] == EMBER_DLTENSOR_HANDLE || "
            f"type_codes[{k}] == EMBER_NDARRAY_HANDLE) {{",
            f"    DLTensor* h{k} = (DLTensor*)args[{k}].v_handle;",
            f"    s{k} = h{k} == NULL ? NULL : h{k}->data;",
            "  } else {",
            *_fail(f"{where} must be a handle"),
            "  }",
        ]
    ctype = c_type(v.dtype)
    if dt.is_float(v.dtype):
        return [
            f"  {ctype} s{k};",
            f"  if (type_codes[{k}] == EMBER_FLOAT) {{",
            f"    s{k} = ({ctype})args[{k}].v_float64;",
            f"  }} else if (type_codes[{k}] == EMBER_INT) {{",
            f"    s{k} = ({ctype})args[{k}].v_int64;",
            "  } else {",
            *_fail(f"{where} must be a float"),
            "  }",
        ]
    return [
        f"  if (type_codes[{k}] != EMBER_INT && type_codes[{k}] != EMBER_UINT) {{",
        *_fail(f"{where} must be an integer"),
        "  }",
        f"  {ctype} s{k} = ({ctype})args[{k}].v_int64;",
    ]
