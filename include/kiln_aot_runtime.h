/*
 * kiln_aot_runtime.h: the C side of `kiln aot build --emit obj,h`.
 *
 * Scope: `kiln aot build --emit obj,h` writes, per kernel set (one manifest [[kernel]] and
 * dtype), an object file `<set>.o` with the kernels' machine code and a header `<set>.h`
 * describing each kernel with the tables below; this header (copied next to them) runs such
 * a description on caller-owned buffers. Everything here is `static inline`: no library to
 * link besides the objects and libc (malloc/free for intermediate stage buffers).
 *
 * The kernel ABI (what kiln's runtime calls, see codegen/src/cpu/mod.rs `RowFn`): a stencil
 * kernel is a list of stages; stage s computes one output row per call of
 *
 *   void stageN(const uint8_t *const *rows, const int64_t *strides,
 *               uint8_t *out, int64_t out_stride, int64_t width);
 *
 * with rows[i] pointing at column 0 of the row slot i reads (a row of an input or of an
 * earlier stage, moved along the outer spatial axes by the slot's offset and remapped under
 * its border mode; under a constant border and outside the tensor, one element holding the
 * constant with stride 0; for an in-range slot, one byte: 1 when the moved row lies inside
 * the shape), strides[i] the row's column stride in elements, out the output row (column
 * stride out_stride), width >= 1 the number of columns. The row function handles the
 * innermost axis and its borders itself. `stageN_rows` is the multi-row form (see
 * `RowsFn`); the runner below uses the one-row form.
 *
 * Exactness: the runner resolves row pointers with the same rules as kiln's row scheduler
 * (runtime/src/fused/stencil/exec.rs `resolve`, kiln_ir::semantics::remap_index), and the
 * row functions are the bytes kiln's JIT runs, so results are bit for bit kiln's.
 *
 * Limits: contiguous C-order tensors only; stages are materialised as whole tensors (no
 * scratch rings), so a k-stage kernel needs (k - 1) intermediate tensors; one thread.
 * Return codes: 0 success, KILN_AOT_EBADARG (bad rank or shape), KILN_AOT_ENOMEM.
 */
#ifndef KILN_AOT_RUNTIME_H
#define KILN_AOT_RUNTIME_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_AOT_MAX_RANK 10
#define KILN_AOT_EBADARG 1
#define KILN_AOT_ENOMEM 2

/* A stage's one-row entry point (see above). */
typedef void (*kiln_aot_row_fn)(const uint8_t *const *rows, const int64_t *strides,
                                uint8_t *out, int64_t out_stride, int64_t width);

/* What a row slot points at. */
enum {
    KILN_AOT_SLOT_INPUT = 0, /* a row of kernel input `source` */
    KILN_AOT_SLOT_STAGE = 1, /* a row of earlier stage `source` */
    KILN_AOT_SLOT_IN_RANGE = 2 /* one byte: whether the moved row is inside the shape */
};

/* Border modes along the outer axes (scipy's names). */
enum {
    KILN_AOT_BORDER_CONSTANT = 0,
    KILN_AOT_BORDER_REFLECT = 1,
    KILN_AOT_BORDER_MIRROR = 2,
    KILN_AOT_BORDER_NEAREST = 3,
    KILN_AOT_BORDER_WRAP = 4
};

/* One row pointer a stage needs. */
typedef struct {
    int kind;
    int source;
    int border;
    /* KILN_AOT_BORDER_CONSTANT: one element of the source's dtype holding the constant. */
    const void *cval;
    /* Offsets along axes 2 .. rank-2 (the spatial axes but the innermost). */
    int64_t outer_offset[KILN_AOT_MAX_RANK];
} kiln_aot_slot;

/* One stage: its row function, its element size, its slots in argument order. */
typedef struct {
    kiln_aot_row_fn row;
    size_t elem_size;
    int nslots;
    const kiln_aot_slot *slots;
} kiln_aot_stage;

/* A stencil kernel: rank (batch, channel, spatial axes), inputs' element sizes, stages (the
 * last one writes the output). */
typedef struct {
    int rank;
    int ninputs;
    const size_t *input_elem_size;
    int nstages;
    const kiln_aot_stage *stages;
} kiln_aot_stencil;

/* remap_index of SEMANTICS.md: j moved into [0, n) under `border`; 0 when a constant
 * border yields its constant (then *out is unchanged), else 1. */
static inline int kiln_aot_remap(int64_t j, int64_t n, int border, int64_t *out)
{
    int64_t m;
    if (j >= 0 && j < n) {
        *out = j;
        return 1;
    }
    switch (border) {
    case KILN_AOT_BORDER_NEAREST:
        m = j < 0 ? 0 : n - 1;
        break;
    case KILN_AOT_BORDER_WRAP:
        m = ((j % n) + n) % n;
        break;
    case KILN_AOT_BORDER_REFLECT:
        m = ((j % (2 * n)) + 2 * n) % (2 * n);
        if (m >= n)
            m = 2 * n - 1 - m;
        break;
    case KILN_AOT_BORDER_MIRROR:
        if (n == 1) {
            m = 0;
        } else {
            int64_t p = 2 * n - 2;
            m = ((j % p) + p) % p;
            if (m >= n)
                m = p - m;
        }
        break;
    default:
        return 0;
    }
    *out = m;
    return 1;
}

/* Runs stencil kernel `k` on contiguous C-order tensors of shape `shape` (k->rank entries):
 * inputs[i] holds input i, `output` receives the result (it must not overlap an input). */
static inline int kiln_aot_run_stencil(const kiln_aot_stencil *k, const int64_t *shape,
                                       const void *const *inputs, void *output)
{
    static const uint8_t in_range[2] = {0, 1};
    const uint8_t *ptrs[64];
    int64_t strides[64];
    int64_t oc[KILN_AOT_MAX_RANK];
    uint8_t *scratch[64];
    int64_t rows = 1, width, r;
    int rank = k->rank, s, i, a, rc = 0;
    if (rank < 3 || rank > KILN_AOT_MAX_RANK || k->nstages < 1 || k->nstages > 64)
        return KILN_AOT_EBADARG;
    for (a = 0; a < rank; a++) {
        if (shape[a] < 0)
            return KILN_AOT_EBADARG;
        if (a + 1 < rank) {
            if (shape[a] != 0 && rows > INT64_MAX / shape[a])
                return KILN_AOT_EBADARG;
            rows *= shape[a];
        }
    }
    width = shape[rank - 1];
    if (rows == 0 || width == 0)
        return 0;
    if (rows > INT64_MAX / width)
        return KILN_AOT_EBADARG;
    for (s = 0; s < k->nstages; s++)
        scratch[s] = NULL;
    for (s = 0; s + 1 < k->nstages; s++) {
        size_t es = k->stages[s].elem_size;
        if ((uint64_t)(rows * width) > SIZE_MAX / es) {
            rc = KILN_AOT_EBADARG;
            goto done;
        }
        scratch[s] = (uint8_t *)malloc((size_t)(rows * width) * es);
        if (!scratch[s]) {
            rc = KILN_AOT_ENOMEM;
            goto done;
        }
    }
    for (s = 0; s < k->nstages; s++) {
        const kiln_aot_stage *st = &k->stages[s];
        uint8_t *dst = s + 1 == k->nstages ? (uint8_t *)output : scratch[s];
        if (st->nslots > 64) {
            rc = KILN_AOT_EBADARG;
            goto done;
        }
        for (r = 0; r < rows; r++) {
            int64_t rest = r;
            for (a = rank - 2; a >= 0; a--) {
                oc[a] = rest % shape[a];
                rest /= shape[a];
            }
            for (i = 0; i < st->nslots; i++) {
                const kiln_aot_slot *sl = &st->slots[i];
                int inside = 1;
                int64_t flat = oc[0] * shape[1] + oc[1];
                for (a = 2; a + 1 < rank; a++) {
                    int64_t d = sl->outer_offset[a - 2], c = oc[a];
                    if (sl->kind == KILN_AOT_SLOT_IN_RANGE) {
                        inside &= (c + d >= 0 && c + d < shape[a]);
                        continue;
                    }
                    if (d != 0 && !kiln_aot_remap(c + d, shape[a], sl->border, &c)) {
                        inside = 0;
                        break;
                    }
                    flat = flat * shape[a] + c;
                }
                if (sl->kind == KILN_AOT_SLOT_IN_RANGE) {
                    ptrs[i] = &in_range[inside];
                    strides[i] = 0;
                } else if (!inside) {
                    ptrs[i] = (const uint8_t *)sl->cval;
                    strides[i] = 0;
                } else if (sl->kind == KILN_AOT_SLOT_INPUT) {
                    if (sl->source < 0 || sl->source >= k->ninputs) {
                        rc = KILN_AOT_EBADARG;
                        goto done;
                    }
                    ptrs[i] = (const uint8_t *)inputs[sl->source] +
                              (size_t)(flat * width) * k->input_elem_size[sl->source];
                    strides[i] = 1;
                } else {
                    if (sl->source < 0 || sl->source >= s) {
                        rc = KILN_AOT_EBADARG;
                        goto done;
                    }
                    ptrs[i] = scratch[sl->source] +
                              (size_t)(flat * width) * k->stages[sl->source].elem_size;
                    strides[i] = 1;
                }
            }
            st->row(ptrs, strides, dst + (size_t)(r * width) * st->elem_size, 1, width);
        }
    }
done:
    for (s = 0; s < k->nstages; s++)
        free(scratch[s]);
    return rc;
}

#ifdef __cplusplus
}
#endif

#endif /* KILN_AOT_RUNTIME_H */
