/*
 * _ember_ffi: an optional CPython extension for the Python -> C packed-call hot path.
 *
 * Contract: FastFunc(func_addr, resource_addr, ndarray_type, slow_call, check_call, decode)
 * is a callable that packs int, float and NDArray arguments on the C stack, releases the
 * GIL, calls the EmberPackedCFunc and converts Null/Int/Float returns itself. Any other
 * argument type, more than 16 arguments, an int beyond int64 or keyword arguments go to
 * slow_call(*args) (ember's ctypes path); non-zero return codes go to check_call(code),
 * which raises; other return type codes go to decode(raw_bits, code).
 * PreparedCall(...) calls an EmberPackedCFunc over argument arrays built once (executors).
 * The module also holds a C trampoline for C -> Python calls (see py_trampoline).
 * ember builds this file only when Python headers exist; the ctypes path works without it.
 * runtime.c stays free of Python: this is the only C file that includes Python.h.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "ember/runtime_api.h"

#define FAST_MAX_ARGS 16

typedef struct {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  EmberPackedCFunc func;
  void* resource;
  PyObject* ndarray_type;
  PyObject* slow_call;
  PyObject* check_call;
  PyObject* decode;
} FastFunc;

static PyObject* g_handle_name = NULL; /* interned "handle" */

/* ---- C -> Python: the trampoline ------------------------------------------------------
 * resource_handle is a strong reference to the Python callable (dropped by py_finalize).
 * Int/Float/Null/Str arguments and Null/Int/Float returns are converted here; everything
 * else goes through the Python helpers installed by configure(). */
static PyObject* g_decode_arg = NULL;   /* decode_arg(raw_bits, code) -> value */
static PyObject* g_write_return = NULL; /* write_return(value, ret_addr, ret_code_addr) */
static PyObject* g_on_error = NULL;     /* on_error(exception, func): records it, sets message */

static void report_error(PyObject* func) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  if (value != NULL && tb != NULL) PyException_SetTraceback(value, tb);
  PyObject* r = NULL;
  if (g_on_error != NULL && value != NULL) {
    r = PyObject_CallFunctionObjArgs(g_on_error, value, func, NULL);
  }
  if (r == NULL) PyErr_Clear();
  Py_XDECREF(r);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
}

static PyObject* arg_to_python(EmberValue* v, int32_t code) {
  switch (code) {
    case EMBER_INT:
      return PyLong_FromLongLong((long long)v->v_int64);
    case EMBER_FLOAT:
      return PyFloat_FromDouble(v->v_float64);
    case EMBER_NULL:
      Py_RETURN_NONE;
    case EMBER_STR:
      return PyUnicode_FromString(v->v_str != NULL ? v->v_str : "");
    default:
      return PyObject_CallFunction(g_decode_arg, "Li", (long long)v->v_int64, (int)code);
  }
}

static int32_t py_trampoline(EmberValue* args, int32_t* type_codes, int32_t num_args,
                             EmberValue* ret, int32_t* ret_code, void* resource) {
  PyGILState_STATE gil = PyGILState_Ensure();
  PyObject* func = (PyObject*)resource;
  PyObject* result = NULL;
  PyObject* tuple = PyTuple_New(num_args < 0 ? 0 : num_args);
  if (tuple == NULL) goto fail;
  for (int32_t i = 0; i < num_args; ++i) {
    PyObject* item = arg_to_python(&args[i], type_codes[i]);
    if (item == NULL) {
      Py_DECREF(tuple);
      goto fail;
    }
    PyTuple_SET_ITEM(tuple, i, item);
  }
  result = PyObject_Call(func, tuple, NULL);
  Py_DECREF(tuple);
  if (result == NULL) goto fail;
  if (ret != NULL && ret_code != NULL) {
    int overflow = 0;
    if (result == Py_None) {
      *ret_code = EMBER_NULL;
    } else if (PyLong_CheckExact(result) &&
               (ret->v_int64 = (int64_t)PyLong_AsLongLongAndOverflow(result, &overflow),
                overflow == 0)) {
      *ret_code = EMBER_INT;
    } else if (PyFloat_CheckExact(result)) {
      ret->v_float64 = PyFloat_AS_DOUBLE(result);
      *ret_code = EMBER_FLOAT;
    } else {
      PyObject* r = PyObject_CallFunction(g_write_return, "OKK", result,
                                          (unsigned long long)(uintptr_t)ret,
                                          (unsigned long long)(uintptr_t)ret_code);
      if (r == NULL) goto fail;
      Py_DECREF(r);
    }
  }
  Py_DECREF(result);
  PyGILState_Release(gil);
  return 0;
fail:
  Py_XDECREF(result);
  report_error(func);
  PyGILState_Release(gil);
  return -1;
}

static void py_finalize(void* resource) {
  if (!Py_IsInitialized()) return; /* at interpreter exit the object is gone anyway */
  PyGILState_STATE gil = PyGILState_Ensure();
  Py_DECREF((PyObject*)resource);
  PyGILState_Release(gil);
}

static PyObject* ffi_configure(PyObject* mod, PyObject* args) {
  PyObject *decode, *write_return, *on_error;
  if (!PyArg_ParseTuple(args, "OOO", &decode, &write_return, &on_error)) return NULL;
  Py_INCREF(decode);
  Py_XSETREF(g_decode_arg, decode);
  Py_INCREF(write_return);
  Py_XSETREF(g_write_return, write_return);
  Py_INCREF(on_error);
  Py_XSETREF(g_on_error, on_error);
  Py_RETURN_NONE;
}

static PyObject* ffi_trampoline_address(PyObject* mod, PyObject* unused) {
  return PyLong_FromVoidPtr((void*)(uintptr_t)py_trampoline);
}

static PyObject* ffi_finalizer_address(PyObject* mod, PyObject* unused) {
  return PyLong_FromVoidPtr((void*)(uintptr_t)py_finalize);
}

static PyObject* ffi_new_reference(PyObject* mod, PyObject* obj) {
  Py_INCREF(obj);
  return PyLong_FromVoidPtr((void*)obj);
}

static PyObject* ffi_release_reference(PyObject* mod, PyObject* address) {
  void* p = PyLong_AsVoidPtr(address);
  if (p == NULL) {
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
  }
  Py_DECREF((PyObject*)p);
  Py_RETURN_NONE;
}

static PyMethodDef ffi_methods[] = {
    {"configure", ffi_configure, METH_VARARGS, "Install the Python helpers of the trampoline."},
    {"trampoline_address", ffi_trampoline_address, METH_NOARGS, "Address of py_trampoline."},
    {"finalizer_address", ffi_finalizer_address, METH_NOARGS, "Address of py_finalize."},
    {"new_reference", ffi_new_reference, METH_O, "Add a reference; return the object address."},
    {"release_reference", ffi_release_reference, METH_O, "Drop a reference from new_reference."},
    {NULL, NULL, 0, NULL},
};

static PyObject* fast_slow(FastFunc* self, PyObject* const* args, size_t nargsf,
                           PyObject* kwnames) {
  return PyObject_Vectorcall(self->slow_call, args, nargsf, kwnames);
}

static PyObject* fast_vectorcall(PyObject* callable, PyObject* const* args, size_t nargsf,
                                 PyObject* kwnames) {
  FastFunc* self = (FastFunc*)callable;
  Py_ssize_t n = PyVectorcall_NARGS(nargsf);
  if (n > FAST_MAX_ARGS || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0)) {
    return fast_slow(self, args, nargsf, kwnames);
  }
  EmberValue values[FAST_MAX_ARGS];
  int32_t codes[FAST_MAX_ARGS];
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* a = args[i];
    PyTypeObject* t = Py_TYPE(a);
    if ((PyObject*)t == self->ndarray_type) {
      PyObject* h = PyObject_GetAttr(a, g_handle_name);
      if (h == NULL) return NULL;
      values[i].v_handle = PyLong_AsVoidPtr(h);
      Py_DECREF(h);
      if (values[i].v_handle == NULL && PyErr_Occurred()) return NULL;
      codes[i] = EMBER_NDARRAY_HANDLE;
    } else if (t == &PyLong_Type) {
      int overflow = 0;
      long long v = PyLong_AsLongLongAndOverflow(a, &overflow);
      if (overflow) return fast_slow(self, args, nargsf, kwnames);
      values[i].v_int64 = (int64_t)v;
      codes[i] = EMBER_INT;
    } else if (t == &PyFloat_Type) {
      values[i].v_float64 = PyFloat_AS_DOUBLE(a);
      codes[i] = EMBER_FLOAT;
    } else {
      return fast_slow(self, args, nargsf, kwnames);
    }
  }
  EmberValue ret;
  int32_t ret_code = EMBER_NULL;
  int32_t status;
  ret.v_handle = NULL;
  Py_BEGIN_ALLOW_THREADS
  status = self->func(values, codes, (int32_t)n, &ret, &ret_code, self->resource);
  Py_END_ALLOW_THREADS
  if (status != 0) {
    PyObject* r = PyObject_CallFunction(self->check_call, "i", (int)status);
    if (r == NULL) return NULL;
    Py_DECREF(r);
    PyErr_SetString(PyExc_RuntimeError, "packed call failed but check_call did not raise");
    return NULL;
  }
  switch (ret_code) {
    case EMBER_NULL:
      Py_RETURN_NONE;
    case EMBER_INT:
      return PyLong_FromLongLong((long long)ret.v_int64);
    case EMBER_FLOAT:
      return PyFloat_FromDouble(ret.v_float64);
    default:
      return PyObject_CallFunction(self->decode, "Li", (long long)ret.v_int64, (int)ret_code);
  }
}

static PyObject* fast_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  unsigned long long func_addr = 0, resource_addr = 0;
  PyObject *nd_type, *slow, *check, *decode;
  if (!PyArg_ParseTuple(args, "KKOOOO", &func_addr, &resource_addr, &nd_type, &slow, &check,
                        &decode)) {
    return NULL;
  }
  if (func_addr == 0) {
    PyErr_SetString(PyExc_ValueError, "FastFunc needs a non-NULL function pointer");
    return NULL;
  }
  FastFunc* self = (FastFunc*)type->tp_alloc(type, 0);
  if (self == NULL) return NULL;
  self->vectorcall = fast_vectorcall;
  self->func = (EmberPackedCFunc)(uintptr_t)func_addr;
  self->resource = (void*)(uintptr_t)resource_addr;
  Py_INCREF(nd_type);
  self->ndarray_type = nd_type;
  Py_INCREF(slow);
  self->slow_call = slow;
  Py_INCREF(check);
  self->check_call = check;
  Py_INCREF(decode);
  self->decode = decode;
  return (PyObject*)self;
}

static int fast_traverse(FastFunc* self, visitproc visit, void* arg) {
  Py_VISIT(self->ndarray_type);
  Py_VISIT(self->slow_call);
  Py_VISIT(self->check_call);
  Py_VISIT(self->decode);
  return 0;
}

static int fast_clear(FastFunc* self) {
  Py_CLEAR(self->ndarray_type);
  Py_CLEAR(self->slow_call);
  Py_CLEAR(self->check_call);
  Py_CLEAR(self->decode);
  return 0;
}

static void fast_dealloc(FastFunc* self) {
  PyObject_GC_UnTrack(self);
  fast_clear(self);
  Py_TYPE(self)->tp_free((PyObject*)self);
}

static PyTypeObject FastFuncType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "_ember_ffi.FastFunc",
    .tp_basicsize = sizeof(FastFunc),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A packed C function with a vectorcall fast path for int/float/NDArray args.",
    .tp_new = fast_new,
    .tp_dealloc = (destructor)fast_dealloc,
    .tp_traverse = (traverseproc)fast_traverse,
    .tp_clear = (inquiry)fast_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(FastFunc, vectorcall),
};

/* ---- PreparedCall: a packed call whose arguments were built once --------------------------
 * PreparedCall(func, values, codes, num_args, ret_value, ret_code, resource) holds raw
 * addresses of an EmberPackedCFunc and of argument arrays its owner keeps alive; calling
 * it with no arguments releases the GIL, makes the call and returns its status (an int).
 * An executor's run is then one vectorcall: 0.6 us of ctypes per call becomes ~0.1. */
typedef struct {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  EmberPackedCFunc func;
  EmberValue* values;
  int32_t* codes;
  int32_t num_args;
  EmberValue* ret;
  int32_t* ret_code;
  void* resource;
} PreparedCall;

static PyObject* prepared_vectorcall(PyObject* callable, PyObject* const* args, size_t nargsf,
                                     PyObject* kwnames) {
  PreparedCall* self = (PreparedCall*)callable;
  (void)args;
  if (PyVectorcall_NARGS(nargsf) != 0 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0)) {
    PyErr_SetString(PyExc_TypeError, "a PreparedCall takes no arguments");
    return NULL;
  }
  int32_t status;
  Py_BEGIN_ALLOW_THREADS
  status = self->func(self->values, self->codes, self->num_args, self->ret, self->ret_code,
                      self->resource);
  Py_END_ALLOW_THREADS
  return PyLong_FromLong((long)status);
}

static PyObject* prepared_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  unsigned long long func = 0, values = 0, codes = 0, ret = 0, ret_code = 0, resource = 0;
  int num_args = 0;
  if (!PyArg_ParseTuple(args, "KKKiKKK", &func, &values, &codes, &num_args, &ret, &ret_code,
                        &resource)) {
    return NULL;
  }
  if (func == 0 || ret == 0 || ret_code == 0 || num_args < 0 ||
      (num_args > 0 && (values == 0 || codes == 0))) {
    PyErr_SetString(PyExc_ValueError, "PreparedCall needs non-NULL function and arrays");
    return NULL;
  }
  PreparedCall* self = (PreparedCall*)type->tp_alloc(type, 0);
  if (self == NULL) return NULL;
  self->vectorcall = prepared_vectorcall;
  self->func = (EmberPackedCFunc)(uintptr_t)func;
  self->values = (EmberValue*)(uintptr_t)values;
  self->codes = (int32_t*)(uintptr_t)codes;
  self->num_args = (int32_t)num_args;
  self->ret = (EmberValue*)(uintptr_t)ret;
  self->ret_code = (int32_t*)(uintptr_t)ret_code;
  self->resource = (void*)(uintptr_t)resource;
  return (PyObject*)self;
}

static PyTypeObject PreparedCallType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "_ember_ffi.PreparedCall",
    .tp_basicsize = sizeof(PreparedCall),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A packed C call over argument arrays built once; returns its status.",
    .tp_new = prepared_new,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(PreparedCall, vectorcall),
};

static struct PyModuleDef ffi_module = {
    PyModuleDef_HEAD_INIT, "_ember_ffi", "ember's optional packed-call accelerator", -1,
    ffi_methods,
};

PyMODINIT_FUNC PyInit__ember_ffi(void) {
  if (PyType_Ready(&FastFuncType) < 0) return NULL;
  if (PyType_Ready(&PreparedCallType) < 0) return NULL;
  g_handle_name = PyUnicode_InternFromString("handle");
  if (g_handle_name == NULL) return NULL;
  PyObject* m = PyModule_Create(&ffi_module);
  if (m == NULL) return NULL;
  Py_INCREF(&FastFuncType);
  if (PyModule_AddObject(m, "FastFunc", (PyObject*)&FastFuncType) < 0) {
    Py_DECREF(&FastFuncType);
    Py_DECREF(m);
    return NULL;
  }
  Py_INCREF(&PreparedCallType);
  if (PyModule_AddObject(m, "PreparedCall", (PyObject*)&PreparedCallType) < 0) {
    Py_DECREF(&PreparedCallType);
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
