/*
 * median.c — the smallest complete use of kiln's C API: a 3x3 median filter (scipy's
 * median_filter, mode "reflect") on an 8x8 float image with one hot pixel, compiled once and
 * run on a caller buffer. Build: see scripts/ci-c.sh (gcc -Iinclude median.c -lkiln_capi).
 */
#include "kiln.h"

#include <stdio.h>

/* Prints the failing call and kiln's message, and returns from main with 1. */
#define TRY(call)                                                                    \
    do {                                                                             \
        kiln_status s_ = (call);                                                     \
        if (s_ != KILN_OK) {                                                         \
            fprintf(stderr, "%s failed: %s: %s\n", #call, kiln_status_name(s_),      \
                    kiln_last_error());                                              \
            return 1;                                                                \
        }                                                                            \
    } while (0)

int main(void) {
    enum { H = 8, W = 8 };
    float image[H * W], result[H * W];
    for (int i = 0; i < H * W; i++) image[i] = (float)(i % W);
    image[3 * W + 4] = 1000.0f; /* the outlier the median removes */

    kiln_engine *engine = NULL;
    kiln_op *op = NULL;
    kiln_graph *graph = NULL;
    kiln_compiled *compiled = NULL;
    const size_t shape[4] = {1, 1, H, W}; /* [batch, channel, height, width] */

    TRY(kiln_engine_new(&engine));
    TRY(kiln_op_new("median_filter", &op));
    TRY(kiln_op_set_int(op, "size", 3));
    TRY(kiln_op_set_string(op, "mode", "reflect"));
    TRY(kiln_op_build(op, KILN_F32, shape, 4, &graph));
    TRY(kiln_compile(engine, graph, &compiled));

    kiln_buffer in = {image, KILN_F32, 4, shape, NULL}; /* NULL strides: row-major */
    kiln_buffer out = {result, KILN_F32, 4, shape, NULL};
    TRY(kiln_run(compiled, &in, 1, &out, 1));

    size_t kernels = 0;
    TRY(kiln_compiled_kernel_count(compiled, &kernels));
    printf("kiln %s: median_filter 3x3 in %zu kernel(s)\n", kiln_version(), kernels);
    for (int y = 0; y < H; y++) {
        for (int x = 0; x < W; x++) printf(" %4g", result[y * W + x]);
        printf("\n");
    }
    int ok = result[3 * W + 4] == 4.0f; /* the outlier is gone */
    printf("outlier %s\n", ok ? "removed" : "NOT removed");

    kiln_compiled_free(compiled);
    kiln_graph_free(graph);
    kiln_op_free(op);
    kiln_engine_free(engine);
    return ok ? 0 : 1;
}
