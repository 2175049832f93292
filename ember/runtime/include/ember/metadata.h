/* ember model metadata as C data: what a compiled model takes, returns and needs.
 *
 * An AOT build emits one `const EmberMetadata` per model, returned by the generated
 * accessor `const EmberMetadata* ember_<mod>_get_metadata(void)` (declared in the model's
 * header `ember_<mod>.h`). The same Python source writes this, metadata.json and the
 * get_metadata packed function, so the three always agree. Plain C99, no runtime needed.
 */
#ifndef EMBER_METADATA_H_
#define EMBER_METADATA_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief the metadata layout version (metadata.json's "version"). */
#define EMBER_METADATA_VERSION 1

/*! \brief One argument of a model or function. */
typedef struct EmberParameterInfo {
  const char* relay_name_hint; /* the model's name of the tensor (ONNX name) */
  const char* tir_name_hint;   /* the name in the generated code */
  const int64_t* shape;
  int32_t ndim;
  const char* dtype; /* "float32", "int64", ... */
} EmberParameterInfo;

/*! \brief A compiled function: its arguments (inputs, then outputs) and memory sizes. */
typedef struct EmberFunctionInfo {
  const char* function_name;
  const EmberParameterInfo* params;
  int32_t num_inputs;
  int32_t num_outputs;
  int64_t workspace_size_bytes;
  int64_t io_size_bytes;
  int64_t constant_size_bytes;
} EmberFunctionInfo;

/*! \brief A model: its run function first, then one entry per operator function. */
typedef struct EmberMetadata {
  int64_t version;
  const char* module_name;
  const char* executor;      /* "aot" or "graph" */
  const char* interface_api; /* "packed" or "c" */
  const EmberParameterInfo* inputs;
  int32_t num_inputs;
  const EmberParameterInfo* outputs;
  int32_t num_outputs;
  const EmberParameterInfo* constants;
  int32_t num_constants;
  const EmberFunctionInfo* functions;
  int32_t num_functions;
} EmberMetadata;

#ifdef __cplusplus
}
#endif
#endif /* EMBER_METADATA_H_ */
