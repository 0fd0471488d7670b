/*
 * kiln.h — the C API of kiln, a JIT kernel compiler and operator-fusion engine for
 * image-processing operators. Link with libkiln_capi.so (-lkiln_capi) or libkiln_capi.a
 * (plus -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc). Guide: docs/C_API.md.
 *
 * Workflow: kiln_engine_new -> kiln_op_new + kiln_op_set_* + kiln_op_build (or
 * kiln_graph_parse) -> kiln_compile -> kiln_run (any number of times) -> *_free.
 *
 * Conventions:
 *  - Every fallible function returns a kiln_status; KILN_OK (0) is success. On failure
 *    kiln_last_error() gives a one-line message for the calling thread. Out-parameters are
 *    written only on success.
 *  - Shapes are [B, C, S1..Sd] (batch, channel, 1 to 8 spatial axes), as size_t extents.
 *  - Strides are in ELEMENTS (not bytes), signed, one per axis; NULL means C-contiguous
 *    (row-major). numpy users divide arr.strides by arr.itemsize. Data need not be aligned.
 *  - Buffers are copied in before and out after a run: outputs may alias inputs.
 *  - No panic or exception crosses the boundary; a bug inside kiln is KILN_ERR_INTERNAL.
 *  - Handles (engine, compiled) may be used from many threads at once; a kiln_op or
 *    kiln_graph being modified/freed must not be used concurrently.
 */
#ifndef KILN_H
#define KILN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_VERSION_MAJOR 0
#define KILN_VERSION_MINOR 1
#define KILN_VERSION_PATCH 0
/* MAJOR * 10000 + MINOR * 100 + PATCH; compare with kiln_version_number(). */
#define KILN_VERSION_NUMBER \
    (KILN_VERSION_MAJOR * 10000 + KILN_VERSION_MINOR * 100 + KILN_VERSION_PATCH)

/* Most axes a tensor may have: batch, channel and 8 spatial axes. */
#define KILN_MAX_RANK 10

/* Result of every fallible call. */
typedef enum kiln_status {
    KILN_OK = 0,
    KILN_ERR_NULL_POINTER = 1,     /* a required pointer argument was NULL */
    KILN_ERR_INVALID_ARGUMENT = 2, /* bad dtype code, non-UTF-8 string, wrong setter, bad count */
    KILN_ERR_SHAPE = 3,            /* buffer dtype/rank/shape/strides or buffer count mismatch */
    KILN_ERR_UNKNOWN_OP = 4,       /* no operator of that name */
    KILN_ERR_PARAM = 5,            /* unknown, malformed, missing or out-of-range parameter */
    KILN_ERR_BUILD = 6,            /* operator/graph rejected the input type or arguments */
    KILN_ERR_PARSE = 7,            /* IR text does not parse (message has line:col) */
    KILN_ERR_COMPILE = 8,          /* lowering or code generation failed */
    KILN_ERR_OUT_OF_MEMORY = 9,    /* the run needs more memory than is available */
    KILN_ERR_RUNTIME = 10,         /* any other failure while running */
    KILN_ERR_INTERNAL = 11         /* a bug in kiln (a caught panic) */
} kiln_status;

/* Element types. KILN_BOOL is one byte per element; on input any nonzero byte is true,
 * outputs hold 0 or 1. */
typedef enum kiln_dtype {
    KILN_F32 = 0,
    KILN_F64 = 1,
    KILN_U8 = 2,
    KILN_BOOL = 3,
    /* Integer element types (little-endian, wrapping arithmetic); added after the first
     * four, whose values are unchanged. */
    KILN_I8 = 4,
    KILN_U16 = 5,
    KILN_I16 = 6,
    KILN_I32 = 7,
    KILN_U32 = 8
} kiln_dtype;

typedef struct kiln_engine kiln_engine;     /* kernel cache + threads */
typedef struct kiln_op kiln_op;             /* an operator being configured */
typedef struct kiln_graph kiln_graph;       /* a validated, shape-bound graph */
typedef struct kiln_compiled kiln_compiled; /* fused kernels of a graph; keeps its engine alive */

/* A caller buffer. The caller guarantees that every element addressed by data, shape and
 * strides lies in its allocation (kiln cannot check that); inputs are only read. */
typedef struct kiln_buffer {
    void *data;             /* element [0, 0, ..., 0] */
    kiln_dtype dtype;
    size_t rank;            /* <= KILN_MAX_RANK */
    const size_t *shape;    /* rank extents */
    const int64_t *strides; /* rank strides in ELEMENTS (may be negative or 0), or NULL */
} kiln_buffer;

/* The dtype and shape of a graph input or output. */
typedef struct kiln_tensor_info {
    kiln_dtype dtype;
    size_t rank;
    size_t shape[KILN_MAX_RANK]; /* first rank entries used, the rest 0 */
} kiln_tensor_info;

/* ---- version and errors ---- */

/* "MAJOR.MINOR.PATCH" of the library (static string). */
const char *kiln_version(void);
/* MAJOR * 10000 + MINOR * 100 + PATCH of the library. */
uint32_t kiln_version_number(void);
/* Message of this thread's last failed call, "" after a successful call. Valid until the
 * next kiln call on this thread; never NULL. */
const char *kiln_last_error(void);
/* "KILN_ERR_SHAPE" etc. for a status code, "KILN_UNKNOWN_STATUS" otherwise (static). */
const char *kiln_status_name(int status);

/* ---- engines ---- */

/* An engine on the process-wide thread pool. */
kiln_status kiln_engine_new(kiln_engine **out);
/* An engine with its own pool of `threads` threads (0: one per core; at most 4096). */
kiln_status kiln_engine_new_with_threads(size_t threads, kiln_engine **out);
/* Frees an engine (NULL is ignored); compiled graphs made with it stay usable. */
void kiln_engine_free(kiln_engine *engine);

/* ---- operators (names: median_blur, median_filter, grey_erosion, grey_dilation,
 *      grey_opening, grey_closing, gradient_magnitude, binary_erosion) ---- */

kiln_status kiln_op_new(const char *name, kiln_op **out);
void kiln_op_free(kiln_op *op);
/* Integer lists: "k" (median_blur: k or ky,kx), "size" (one or one per spatial axis),
 * "origin" (one or one per spatial axis). A parameter set twice keeps the last value. */
kiln_status kiln_op_set_ints(kiln_op *op, const char *name, const int64_t *values, size_t count);
kiln_status kiln_op_set_int(kiln_op *op, const char *name, int64_t value);
/* "cval": the value outside the image for mode "constant" (converted to the dtype). */
kiln_status kiln_op_set_double(kiln_op *op, const char *name, double value);
/* "border_value" (binary_erosion): 0 or nonzero. */
kiln_status kiln_op_set_bool(kiln_op *op, const char *name, int value);
/* "mode": constant, reflect (default), mirror, nearest, wrap, grid-constant, grid-mirror,
 * grid-wrap. */
kiln_status kiln_op_set_string(kiln_op *op, const char *name, const char *value);
/* "footprint" / "structure": `rank` (1..3) extents in shape, their product of bytes in mask
 * (row-major, nonzero = inside). */
kiln_status kiln_op_set_mask(kiln_op *op, const char *name, const uint8_t *mask,
                             const size_t *shape, size_t rank);
/* Builds the operator for one input of dtype and shape (rank extents) into a new graph. */
kiln_status kiln_op_build(const kiln_op *op, kiln_dtype dtype, const size_t *shape, size_t rank,
                          kiln_graph **out);

/* ---- graphs ---- */

/* Parses IR text (docs/IR_TEXT.md) into a new graph. */
kiln_status kiln_graph_parse(const char *text, kiln_graph **out);
void kiln_graph_free(kiln_graph *graph);
/* The graph as IR text in a new string, freed with kiln_string_free. */
kiln_status kiln_graph_to_text(const kiln_graph *graph, char **out);
void kiln_string_free(char *s);
kiln_status kiln_graph_num_inputs(const kiln_graph *graph, size_t *count);
kiln_status kiln_graph_num_outputs(const kiln_graph *graph, size_t *count);
kiln_status kiln_graph_input(const kiln_graph *graph, size_t index, kiln_tensor_info *info);
kiln_status kiln_graph_output(const kiln_graph *graph, size_t index, kiln_tensor_info *info);

/* ---- compile and run ---- */

/* Compiles a graph into fused kernels; the graph may be freed afterwards. */
kiln_status kiln_compile(const kiln_engine *engine, const kiln_graph *graph,
                         kiln_compiled **out);
void kiln_compiled_free(kiln_compiled *compiled);
kiln_status kiln_compiled_kernel_count(const kiln_compiled *compiled, size_t *count);
/* Runs the fused kernels: one buffer per graph input and per output, of exactly the graph's
 * dtypes and shapes. Every buffer is checked before anything runs. Thread-safe. */
kiln_status kiln_run(const kiln_compiled *compiled, const kiln_buffer *inputs,
                     size_t num_inputs, const kiln_buffer *outputs, size_t num_outputs);
/* Runs the graph op by op (kiln's eager oracle); same buffers and results, bit for bit. */
kiln_status kiln_run_eager(const kiln_graph *graph, const kiln_buffer *inputs,
                           size_t num_inputs, const kiln_buffer *outputs, size_t num_outputs);

#ifdef __cplusplus
}
#endif

#endif /* KILN_H */
