/*
 * test_kiln.c — checks of kiln's C API (include/kiln.h), run by scripts/ci-c.sh against the
 * shared and the static library under AddressSanitizer and UBSan.
 *
 * Scope: version, every operator and every dtype it takes (fused kiln_run against the eager
 * oracle kiln_run_eager, bit for bit with memcmp), small cases computed here by hand
 * (median/min/max under each border mode), the IR-text path, strided, negative-stride,
 * padded and aliased buffers, concurrent runs from several threads, and the error paths
 * (status code and message).
 * Exactness: results are compared as bytes, so NaN payloads and signed zeros must match.
 * Limits: CPU only; the hand references cover 2-D windows without NaN (scipy's NaN order is
 * kiln's business, checked in Rust against scipy's own outputs).
 */
#include "kiln.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int passed, failed;

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (cond) {                                                        \
            passed++;                                                      \
        } else {                                                           \
            failed++;                                                      \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);           \
            fprintf(stderr, __VA_ARGS__);                                  \
            fprintf(stderr, " [last error: %s]\n", kiln_last_error());     \
        }                                                                  \
    } while (0)

#define CHECK_OK(call) CHECK((call) == KILN_OK, "%s", #call)

/* Expects `call` to fail with `code` and a message containing `needle`. */
#define CHECK_ERR(call, code, needle)                                                    \
    do {                                                                                 \
        kiln_status s_ = (call);                                                         \
        CHECK(s_ == (code) && strstr(kiln_last_error(), (needle)) != NULL,               \
              "%s: got %s, want %s with \"%s\"", #call, kiln_status_name(s_),            \
              kiln_status_name(code), (needle));                                         \
    } while (0)

static size_t dtype_size(kiln_dtype d) {
    switch (d) {
    case KILN_F64: return 8;
    case KILN_F32: case KILN_I32: case KILN_U32: return 4;
    case KILN_U16: case KILN_I16: return 2;
    case KILN_U8: case KILN_BOOL: case KILN_I8: return 1;
    }
    return 1;
}

static size_t numel(const size_t *shape, size_t rank) {
    size_t n = 1;
    for (size_t i = 0; i < rank; i++) n *= shape[i];
    return n;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* n elements of dtype d: small values with repeats, and for floats NaN, +-inf and -0. */
static void *random_data(kiln_dtype d, size_t n, int specials) {
    unsigned char *p = malloc(n * dtype_size(d) + 1);
    for (size_t i = 0; i < n; i++) {
        uint64_t r = rng();
        double v = (double)(r % 17) - 8.0 + (double)((r >> 8) % 4) * 0.25;
        int special = specials ? (int)((r >> 16) % 40) : 99;
        if (special == 0) v = NAN;
        if (special == 1) v = INFINITY;
        if (special == 2) v = -INFINITY;
        if (special == 3) v = -0.0;
        switch (d) {
        case KILN_F32: ((float *)p)[i] = (float)v; break;
        case KILN_F64: ((double *)p)[i] = v; break;
        case KILN_U8: p[i] = (unsigned char)(r >> 24); break;
        case KILN_BOOL: p[i] = (unsigned char)((r >> 24) % 3 != 0); break;
        case KILN_I8: ((int8_t *)p)[i] = (int8_t)(r >> 24); break;
        case KILN_U16: ((uint16_t *)p)[i] = (uint16_t)(r >> 16); break;
        case KILN_I16: ((int16_t *)p)[i] = (int16_t)(r >> 16); break;
        case KILN_I32: ((int32_t *)p)[i] = (int32_t)(r >> 8); break;
        case KILN_U32: ((uint32_t *)p)[i] = (uint32_t)(r >> 8); break;
        }
    }
    return p;
}

static kiln_buffer buf(void *data, kiln_dtype d, const size_t *shape, size_t rank,
                       const int64_t *strides) {
    kiln_buffer b = {data, d, rank, shape, strides};
    return b;
}

/* Builds operator `name` with the parameters applied by `setup` for dtype d, shape. */
typedef kiln_status (*setup_fn)(kiln_op *);

static kiln_graph *build(const char *name, setup_fn setup, kiln_dtype d, const size_t *shape,
                         size_t rank) {
    kiln_op *op = NULL;
    kiln_graph *g = NULL;
    if (kiln_op_new(name, &op) != KILN_OK) return NULL;
    if (setup && setup(op) != KILN_OK) {
        kiln_op_free(op);
        return NULL;
    }
    kiln_status s = kiln_op_build(op, d, shape, rank, &g);
    kiln_op_free(op);
    return s == KILN_OK ? g : NULL;
}

static kiln_engine *engine;

/* Runs g fused and eager on `in` (single input, single output); checks bit equality.
 * Returns the fused output (malloc'ed) or NULL. */
static void *fused_equals_eager(const char *what, kiln_graph *g, const kiln_buffer *in) {
    kiln_tensor_info info;
    kiln_compiled *c = NULL;
    if (kiln_graph_output(g, 0, &info) != KILN_OK || kiln_compile(engine, g, &c) != KILN_OK) {
        CHECK(0, "%s: compile", what);
        return NULL;
    }
    size_t bytes = numel(info.shape, info.rank) * dtype_size(info.dtype);
    void *fused = malloc(bytes), *eager = malloc(bytes);
    memset(fused, 0xAB, bytes);
    memset(eager, 0xCD, bytes);
    kiln_buffer of = buf(fused, info.dtype, info.shape, info.rank, NULL);
    kiln_buffer oe = buf(eager, info.dtype, info.shape, info.rank, NULL);
    kiln_status sf = kiln_run(c, in, 1, &of, 1);
    kiln_status se = kiln_run_eager(g, in, 1, &oe, 1);
    CHECK(sf == KILN_OK && se == KILN_OK && memcmp(fused, eager, bytes) == 0,
          "%s: fused (%s) vs eager (%s) differ", what, kiln_status_name(sf),
          kiln_status_name(se));
    kiln_compiled_free(c);
    free(eager);
    return fused;
}

/* ---- parameter setups ---- */
static kiln_status p_size3(kiln_op *op) { return kiln_op_set_int(op, "size", 3); }
static kiln_status p_size35_nearest(kiln_op *op) {
    int64_t s[2] = {3, 5};
    kiln_status r = kiln_op_set_ints(op, "size", s, 2);
    return r ? r : kiln_op_set_string(op, "mode", "nearest");
}
static kiln_status p_constant(kiln_op *op) {
    kiln_status r = kiln_op_set_int(op, "size", 3);
    r = r ? r : kiln_op_set_string(op, "mode", "constant");
    return r ? r : kiln_op_set_double(op, "cval", 1.5);
}
static kiln_status p_footprint_origin(kiln_op *op) {
    const uint8_t fp[9] = {0, 1, 0, 1, 1, 1, 0, 1, 0};
    const size_t sh[2] = {3, 3};
    int64_t origin[2] = {-1, 1};
    kiln_status r = kiln_op_set_mask(op, "footprint", fp, sh, 2);
    r = r ? r : kiln_op_set_ints(op, "origin", origin, 2);
    return r ? r : kiln_op_set_string(op, "mode", "wrap");
}
static kiln_status p_k3(kiln_op *op) { return kiln_op_set_int(op, "k", 3); }
static kiln_status p_k53(kiln_op *op) {
    int64_t k[2] = {5, 3};
    return kiln_op_set_ints(op, "k", k, 2);
}
static kiln_status p_mirror(kiln_op *op) { return kiln_op_set_string(op, "mode", "mirror"); }
static kiln_status p_structure(kiln_op *op) {
    const uint8_t st[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    const size_t sh[2] = {3, 3};
    kiln_status r = kiln_op_set_mask(op, "structure", st, sh, 2);
    return r ? r : kiln_op_set_bool(op, "border_value", 1);
}

struct op_case {
    const char *name;
    setup_fn setup;
    kiln_dtype dtypes[4];
    int ndtypes;
};

static void test_ops_all_dtypes(void) {
    const struct op_case cases[] = {
        {"median_filter", p_size3, {KILN_F32, KILN_F64, KILN_U8, KILN_BOOL}, 4},
        {"median_filter", p_size35_nearest, {KILN_F32, KILN_U8}, 2},
        {"median_filter", p_footprint_origin, {KILN_F64}, 1},
        {"grey_erosion", p_size3, {KILN_F32, KILN_F64, KILN_U8, KILN_BOOL}, 4},
        {"grey_erosion", p_constant, {KILN_F32, KILN_F64, KILN_U8}, 3},
        {"grey_dilation", p_size35_nearest, {KILN_F32, KILN_F64, KILN_U8, KILN_BOOL}, 4},
        {"grey_dilation", p_footprint_origin, {KILN_F32, KILN_U8}, 2},
        {"grey_opening", p_size3, {KILN_F32, KILN_F64, KILN_U8, KILN_BOOL}, 4},
        {"grey_closing", p_constant, {KILN_F32, KILN_F64, KILN_U8, KILN_BOOL}, 4},
        {"median_blur", p_k3, {KILN_F32, KILN_F64}, 2},
        {"median_blur", p_k53, {KILN_F32}, 1},
        {"gradient_magnitude", NULL, {KILN_F32, KILN_F64}, 2},
        {"gradient_magnitude", p_mirror, {KILN_F32}, 1},
        {"binary_erosion", NULL, {KILN_BOOL}, 1},
        {"binary_erosion", p_structure, {KILN_BOOL}, 1},
    };
    const size_t shape[4] = {2, 1, 13, 17};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int j = 0; j < cases[i].ndtypes; j++) {
            kiln_dtype d = cases[i].dtypes[j];
            char what[96];
            snprintf(what, sizeof what, "%s #%zu dtype %d", cases[i].name, i, (int)d);
            kiln_graph *g = build(cases[i].name, cases[i].setup, d, shape, 4);
            CHECK(g != NULL, "%s: build", what);
            if (!g) continue;
            void *x = random_data(d, numel(shape, 4), 1);
            kiln_buffer in = buf(x, d, shape, 4, NULL);
            free(fused_equals_eager(what, g, &in));
            free(x);
            kiln_graph_free(g);
        }
    }
}

/* ---- hand references: 2-D windows under scipy's border modes ---- */

static int remap(int i, int n, const char *mode) {
    if (i >= 0 && i < n) return i;
    if (!strcmp(mode, "nearest")) return i < 0 ? 0 : n - 1;
    if (!strcmp(mode, "wrap")) return ((i % n) + n) % n;
    if (!strcmp(mode, "reflect")) { /* d c b a | a b c d | d c b a */
        int p = 2 * n;
        i = ((i % p) + p) % p;
        return i < n ? i : p - 1 - i;
    }
    if (!strcmp(mode, "mirror")) { /* d c b | a b c d | c b a */
        if (n == 1) return 0;
        int p = 2 * n - 2;
        i = ((i % p) + p) % p;
        return i < n ? i : p - i;
    }
    return -1; /* constant */
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* kind: 0 median (element n/2 of the sorted window), 1 min, 2 max; ky x kx box centred. */
static double ref_window(const double *x, int h, int w, int y0, int x0, int ky, int kx,
                         const char *mode, double cval, int kind) {
    double win[64];
    int n = 0;
    for (int dy = -(ky / 2); dy < ky - ky / 2; dy++)
        for (int dx = -(kx / 2); dx < kx - kx / 2; dx++) {
            int yy = remap(y0 + dy, h, mode), xx = remap(x0 + dx, w, mode);
            win[n++] = (yy < 0 || xx < 0) ? cval : x[yy * w + xx];
        }
    qsort(win, (size_t)n, sizeof(double), cmp_double);
    return kind == 0 ? win[n / 2] : kind == 1 ? win[0] : win[n - 1];
}

static void test_hand_references(void) {
    const char *modes[] = {"reflect", "mirror", "nearest", "wrap", "constant"};
    const char *ops[] = {"median_filter", "grey_erosion", "grey_dilation"};
    const int h = 5, w = 7;
    const size_t shape[4] = {1, 1, 5, 7};
    double xd[35];
    float xf[35];
    uint8_t xu[35];
    for (int i = 0; i < 35; i++) {
        xd[i] = (double)((i * 37) % 23) - 5.0;
        xf[i] = (float)xd[i];
        xu[i] = (uint8_t)((i * 53) % 251);
    }
    for (int m = 0; m < 5; m++)
        for (int o = 0; o < 3; o++)
            for (int t = 0; t < 3; t++) {
                kiln_dtype d = t == 0 ? KILN_F32 : t == 1 ? KILN_F64 : KILN_U8;
                kiln_op *op = NULL;
                kiln_graph *g = NULL;
                int64_t size[2] = {3, 5};
                double cval = d == KILN_U8 ? 7.0 : -2.5;
                CHECK_OK(kiln_op_new(ops[o], &op));
                CHECK_OK(kiln_op_set_ints(op, "size", size, 2));
                CHECK_OK(kiln_op_set_string(op, "mode", modes[m]));
                CHECK_OK(kiln_op_set_double(op, "cval", cval));
                CHECK_OK(kiln_op_build(op, d, shape, 4, &g));
                kiln_op_free(op);
                if (!g) continue;
                void *x = d == KILN_F32 ? (void *)xf : d == KILN_F64 ? (void *)xd : (void *)xu;
                kiln_buffer in = buf(x, d, shape, 4, NULL);
                void *y = fused_equals_eager("hand reference", g, &in);
                kiln_graph_free(g);
                if (!y) continue;
                int bad = 0;
                for (int i = 0; i < h && !bad; i++)
                    for (int j = 0; j < w && !bad; j++) {
                        double src[35];
                        for (int k = 0; k < 35; k++)
                            src[k] = d == KILN_U8 ? (double)xu[k] : xd[k];
                        double want = ref_window(src, h, w, i, j, 3, 5, modes[m], cval, o);
                        double got = d == KILN_F32   ? ((float *)y)[i * w + j]
                                     : d == KILN_F64 ? ((double *)y)[i * w + j]
                                                     : ((uint8_t *)y)[i * w + j];
                        if (got != want) {
                            bad = 1;
                            CHECK(0, "%s %s dtype %d at (%d,%d): got %g want %g", ops[o],
                                  modes[m], (int)d, i, j, got, want);
                        }
                    }
                if (!bad) passed++;
                free(y);
            }
}

/* ---- the IR-text path ---- */

static void test_ir_text(void) {
    const char *text = "# 2x - window min\n"
                       "%0 = input 0 : f32[1,1,4,6]\n"
                       "%1 = add %0, %0 : f32[1,1,4,6]\n"
                       "%2 = window min %0 footprint=[[0,-1],[0,0],[0,1]] border=nearest "
                       ": f32[1,1,4,6]\n"
                       "%3 = sub %1, %2 : f32[1,1,4,6]\n"
                       "return %3, %2\n";
    kiln_graph *g = NULL, *g2 = NULL;
    CHECK_OK(kiln_graph_parse(text, &g));
    if (!g) return;
    size_t ni = 0, no = 0;
    kiln_tensor_info ii, io;
    CHECK_OK(kiln_graph_num_inputs(g, &ni));
    CHECK_OK(kiln_graph_num_outputs(g, &no));
    CHECK(ni == 1 && no == 2, "counts %zu %zu", ni, no);
    CHECK_OK(kiln_graph_input(g, 0, &ii));
    CHECK_OK(kiln_graph_output(g, 1, &io));
    CHECK(ii.dtype == KILN_F32 && ii.rank == 4 && ii.shape[2] == 4 && ii.shape[3] == 6 &&
              ii.shape[4] == 0,
          "input info");
    CHECK(io.dtype == KILN_F32 && io.rank == 4, "output info");

    char *printed = NULL;
    CHECK_OK(kiln_graph_to_text(g, &printed));
    CHECK(printed && strstr(printed, "window min") != NULL, "printed text");
    CHECK_OK(kiln_graph_parse(printed, &g2));
    kiln_string_free(printed);

    float x[24], y0[24], y1[24], e0[24], e1[24];
    for (int i = 0; i < 24; i++) x[i] = (float)((i * 7) % 11) - 3.0f;
    const size_t shape[4] = {1, 1, 4, 6};
    kiln_buffer in = buf(x, KILN_F32, shape, 4, NULL);
    kiln_buffer out[2] = {buf(y0, KILN_F32, shape, 4, NULL), buf(y1, KILN_F32, shape, 4, NULL)};
    kiln_buffer eout[2] = {buf(e0, KILN_F32, shape, 4, NULL), buf(e1, KILN_F32, shape, 4, NULL)};
    kiln_compiled *c = NULL;
    CHECK_OK(kiln_compile(engine, g2 ? g2 : g, &c));
    CHECK_OK(kiln_run(c, &in, 1, out, 2));
    CHECK_OK(kiln_run_eager(g, &in, 1, eout, 2));
    CHECK(!memcmp(y0, e0, sizeof y0) && !memcmp(y1, e1, sizeof y1), "IR fused vs eager");
    int bad = 0;
    for (int r = 0; r < 4; r++)
        for (int q = 0; q < 6; q++) {
            float a = x[r * 6 + (q > 0 ? q - 1 : 0)], b = x[r * 6 + q],
                  cc = x[r * 6 + (q < 5 ? q + 1 : 5)];
            float mn = fminf(a, fminf(b, cc));
            if (y1[r * 6 + q] != mn || y0[r * 6 + q] != (b + b) - mn) bad = 1;
        }
    CHECK(!bad, "IR results against the hand computation");
    kiln_compiled_free(c);
    kiln_graph_free(g);
    kiln_graph_free(g2);
}

/* ---- layouts: strides, padding, negative strides, aliasing ---- */

static void test_layouts(void) {
    const size_t shape[4] = {1, 2, 6, 9};
    const size_t n = numel(shape, 4);
    kiln_graph *g = build("grey_opening", p_size35_nearest, KILN_F32, shape, 4);
    CHECK(g != NULL, "layout graph");
    if (!g) return;
    kiln_compiled *c = NULL;
    CHECK_OK(kiln_compile(engine, g, &c));
    float *x = random_data(KILN_F32, n, 1);
    float *want = malloc(n * 4), *got = malloc(n * 4);
    kiln_buffer in = buf(x, KILN_F32, shape, 4, NULL);
    kiln_buffer out = buf(want, KILN_F32, shape, 4, NULL);
    CHECK_OK(kiln_run(c, &in, 1, &out, 1));

    /* input inside a padded buffer: rows of 12, planes of 8 rows, explicit strides */
    const int64_t pad[4] = {2 * 8 * 12, 8 * 12, 12, 1};
    float *big = calloc(2 * 8 * 12, 4);
    for (size_t ch = 0; ch < 2; ch++)
        for (size_t r = 0; r < 6; r++)
            for (size_t q = 0; q < 9; q++) big[ch * 96 + r * 12 + q] = x[(ch * 6 + r) * 9 + q];
    kiln_buffer pin = buf(big, KILN_F32, shape, 4, pad);
    memset(got, 0, n * 4);
    kiln_buffer gout = buf(got, KILN_F32, shape, 4, NULL);
    CHECK_OK(kiln_run(c, &pin, 1, &gout, 1));
    CHECK(!memcmp(got, want, n * 4), "padded input");

    /* column-major (transposed memory order) input, given by strides */
    float *colmaj = malloc(n * 4);
    const int64_t cm[4] = {1, 1, 2, 12}; /* index (0,ch,r,q) at ch + 2r + 12q */
    for (size_t ch = 0; ch < 2; ch++)
        for (size_t r = 0; r < 6; r++)
            for (size_t q = 0; q < 9; q++) colmaj[ch + 2 * r + 12 * q] = x[(ch * 6 + r) * 9 + q];
    kiln_buffer cin = buf(colmaj, KILN_F32, shape, 4, cm);
    memset(got, 0, n * 4);
    CHECK_OK(kiln_run(c, &cin, 1, &gout, 1));
    CHECK(!memcmp(got, want, n * 4), "column-major input");

    /* negative strides: the rows stored bottom-up, data points at the last stored row */
    float *flip = malloc(n * 4);
    for (size_t ch = 0; ch < 2; ch++)
        for (size_t r = 0; r < 6; r++)
            memcpy(&flip[(ch * 6 + (5 - r)) * 9], &x[(ch * 6 + r) * 9], 9 * 4);
    const int64_t neg[4] = {108, 54, -9, 1};
    kiln_buffer nin = buf(flip + 5 * 9, KILN_F32, shape, 4, neg);
    memset(got, 0, n * 4);
    CHECK_OK(kiln_run(c, &nin, 1, &gout, 1));
    CHECK(!memcmp(got, want, n * 4), "negative-stride input");

    /* strided output into a padded buffer: padding untouched */
    float *obig = malloc(2 * 8 * 12 * 4);
    for (int i = 0; i < 2 * 8 * 12; i++) obig[i] = -12345.0f;
    kiln_buffer pout = buf(obig, KILN_F32, shape, 4, pad);
    CHECK_OK(kiln_run(c, &in, 1, &pout, 1));
    int bad = 0;
    for (size_t i = 0; i < 2 * 8 * 12; i++) {
        size_t ch = i / 96, r = (i % 96) / 12, q = i % 12;
        int inside = r < 6 && q < 9;
        float v = obig[i];
        if (inside ? memcmp(&v, &want[(ch * 6 + r) * 9 + q], 4) != 0 : v != -12345.0f) bad = 1;
    }
    CHECK(!bad, "padded output and untouched padding");

    /* in place: the output buffer is the input buffer */
    float *inplace = malloc(n * 4);
    memcpy(inplace, x, n * 4);
    kiln_buffer ip = buf(inplace, KILN_F32, shape, 4, NULL);
    CHECK_OK(kiln_run(c, &ip, 1, &ip, 1));
    CHECK(!memcmp(inplace, want, n * 4), "in-place run");

    /* unaligned data pointer */
    unsigned char *un = malloc(n * 4 + 1);
    memcpy(un + 1, x, n * 4);
    kiln_buffer uin = buf(un + 1, KILN_F32, shape, 4, NULL);
    memset(got, 0, n * 4);
    CHECK_OK(kiln_run(c, &uin, 1, &gout, 1));
    CHECK(!memcmp(got, want, n * 4), "unaligned input");

    free(un);
    free(inplace);
    free(obig);
    free(flip);
    free(colmaj);
    free(big);
    free(x);
    free(want);
    free(got);
    kiln_compiled_free(c);
    kiln_graph_free(g);
}

static void test_bool_normalisation(void) {
    const size_t shape[4] = {1, 1, 6, 6};
    kiln_graph *g = build("binary_erosion", NULL, KILN_BOOL, shape, 4);
    kiln_compiled *c = NULL;
    CHECK_OK(kiln_compile(engine, g, &c));
    uint8_t x01[36], xany[36], y01[36], yany[36];
    for (int i = 0; i < 36; i++) {
        x01[i] = (i % 7) != 0;
        xany[i] = x01[i] ? (uint8_t)(1 + (i * 31) % 255) : 0;
    }
    kiln_buffer a = buf(x01, KILN_BOOL, shape, 4, NULL), b = buf(xany, KILN_BOOL, shape, 4, NULL);
    kiln_buffer oa = buf(y01, KILN_BOOL, shape, 4, NULL), ob = buf(yany, KILN_BOOL, shape, 4, NULL);
    CHECK_OK(kiln_run(c, &a, 1, &oa, 1));
    CHECK_OK(kiln_run(c, &b, 1, &ob, 1));
    int ok = !memcmp(y01, yany, 36);
    for (int i = 0; i < 36; i++) ok &= y01[i] <= 1;
    CHECK(ok, "nonzero bool bytes read as true; outputs 0/1");
    /* hand reference: erosion by the radius-1 cross, outside the image is 0 */
    int bad = 0;
    for (int r = 0; r < 6; r++)
        for (int q = 0; q < 6; q++) {
            int v = x01[r * 6 + q];
            v &= r > 0 && x01[(r - 1) * 6 + q];
            v &= r < 5 && x01[(r + 1) * 6 + q];
            v &= q > 0 && x01[r * 6 + q - 1];
            v &= q < 5 && x01[r * 6 + q + 1];
            if (y01[r * 6 + q] != v) bad = 1;
        }
    CHECK(!bad, "binary_erosion against the hand computation");
    kiln_compiled_free(c);
    kiln_graph_free(g);
}

/* ---- threads: one compiled graph run from several threads at once ---- */

struct job {
    const kiln_compiled *c;
    const kiln_buffer *in;
    const float *want;
    size_t n;
    int ok;
};

static void *worker(void *arg) {
    struct job *j = arg;
    float *out = malloc(j->n * 4);
    kiln_buffer o = {out, KILN_F32, 4, j->in->shape, NULL};
    j->ok = 1;
    for (int it = 0; it < 20; it++) {
        memset(out, 0, j->n * 4);
        if (kiln_run(j->c, j->in, 1, &o, 1) != KILN_OK || memcmp(out, j->want, j->n * 4)) j->ok = 0;
    }
    /* a failure on this thread leaves its message here only */
    if (kiln_run(j->c, j->in, 0, &o, 1) != KILN_ERR_SHAPE || !strstr(kiln_last_error(), "inputs"))
        j->ok = 0;
    free(out);
    return NULL;
}

static void test_threads(void) {
    const size_t shape[4] = {1, 1, 40, 50};
    const size_t n = numel(shape, 4);
    kiln_engine *own = NULL;
    CHECK_OK(kiln_engine_new_with_threads(2, &own));
    kiln_graph *g = build("median_filter", p_size3, KILN_F32, shape, 4);
    kiln_compiled *c = NULL;
    CHECK_OK(kiln_compile(own, g, &c));
    kiln_engine_free(own); /* the compiled graph keeps its engine alive */
    float *x = random_data(KILN_F32, n, 1), *want = malloc(n * 4);
    kiln_buffer in = buf(x, KILN_F32, shape, 4, NULL), out = buf(want, KILN_F32, shape, 4, NULL);
    CHECK_OK(kiln_run_eager(g, &in, 1, &out, 1));
    pthread_t t[4];
    struct job jobs[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (struct job){c, &in, want, n, 0};
        pthread_create(&t[i], NULL, worker, &jobs[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        CHECK(jobs[i].ok, "thread %d", i);
    }
    CHECK(kiln_last_error()[0] == '\0', "main thread's message untouched by other threads");
    kiln_compiled_free(c);
    kiln_graph_free(g);
    free(x);
    free(want);
}

/* ---- error paths ---- */

static void test_errors(void) {
    kiln_op *op = NULL;
    kiln_graph *g = NULL;
    kiln_compiled *c = NULL;
    const size_t shape[4] = {1, 1, 8, 8};
    CHECK_ERR(kiln_engine_new(NULL), KILN_ERR_NULL_POINTER, "out");
    CHECK_ERR(kiln_op_new("median_filtr", &op), KILN_ERR_UNKNOWN_OP, "median_filtr");
    CHECK(op == NULL, "no handle on failure");
    CHECK_ERR(kiln_op_new(NULL, &op), KILN_ERR_NULL_POINTER, "name");
    CHECK_ERR(kiln_op_new("\xff\xfe", &op), KILN_ERR_INVALID_ARGUMENT, "UTF-8");
    CHECK_OK(kiln_op_new("median_filter", &op));
    CHECK(kiln_last_error()[0] == '\0', "success clears the message");
    CHECK_ERR(kiln_op_set_int(op, "sise", 3), KILN_ERR_PARAM, "sise");
    CHECK_ERR(kiln_op_set_double(op, "size", 3.0), KILN_ERR_INVALID_ARGUMENT, "kiln_op_set_int");
    CHECK_ERR(kiln_op_set_string(op, "cval", "1"), KILN_ERR_INVALID_ARGUMENT, "set_double");
    CHECK_ERR(kiln_op_set_ints(op, "size", NULL, 2), KILN_ERR_NULL_POINTER, "values");
    const int64_t three[1] = {3};
    CHECK_ERR(kiln_op_set_ints(op, "size", three, 0), KILN_ERR_INVALID_ARGUMENT, "no values");
    CHECK_ERR(kiln_op_set_int(NULL, "size", 3), KILN_ERR_NULL_POINTER, "op");
    CHECK_ERR(kiln_op_build(op, KILN_F32, shape, 4, &g), KILN_ERR_PARAM, "size");
    CHECK_OK(kiln_op_set_int(op, "size", 0));
    CHECK_ERR(kiln_op_build(op, KILN_F32, shape, 4, &g), KILN_ERR_BUILD, "size");
    CHECK_OK(kiln_op_set_int(op, "size", -3));
    CHECK_ERR(kiln_op_build(op, KILN_F32, shape, 4, &g), KILN_ERR_PARAM, "non-negative");
    CHECK_OK(kiln_op_set_int(op, "size", 3));
    CHECK_OK(kiln_op_set_string(op, "mode", "bogus"));
    CHECK_ERR(kiln_op_build(op, KILN_F32, shape, 4, &g), KILN_ERR_PARAM, "bogus");
    CHECK_OK(kiln_op_set_string(op, "mode", "reflect"));
    CHECK_OK(kiln_op_set_int(op, "origin", 5));
    CHECK_ERR(kiln_op_build(op, KILN_F32, shape, 4, &g), KILN_ERR_BUILD, "origin");
    CHECK_OK(kiln_op_set_int(op, "origin", 0));
    CHECK_ERR(kiln_op_build(op, (kiln_dtype)99, shape, 4, &g), KILN_ERR_INVALID_ARGUMENT, "99");
    const size_t rank2[2] = {8, 8};
    CHECK_ERR(kiln_op_build(op, KILN_F32, rank2, 2, &g), KILN_ERR_BUILD, "shape");
    const size_t zero[4] = {1, 1, 0, 8};
    CHECK_ERR(kiln_op_build(op, KILN_F32, zero, 4, &g), KILN_ERR_BUILD, "shape");
    CHECK_ERR(kiln_op_build(op, KILN_F32, shape, KILN_MAX_RANK + 1, &g), KILN_ERR_SHAPE,
              "KILN_MAX_RANK");
    CHECK_ERR(kiln_op_build(op, KILN_F32, NULL, 4, &g), KILN_ERR_NULL_POINTER, "shape");
    CHECK_ERR(kiln_op_build(op, KILN_F32, shape, 4, NULL), KILN_ERR_NULL_POINTER, "out");
    const uint8_t m[16] = {1};
    const size_t m4[4] = {1, 1, 2, 2};
    CHECK_ERR(kiln_op_set_mask(op, "footprint", m, m4, 4), KILN_ERR_INVALID_ARGUMENT, "1 to 3");
    CHECK_OK(kiln_op_build(op, KILN_F32, shape, 4, &g));
    kiln_op_free(op);
    op = NULL;

    /* binary_erosion truth-tests a float input as scipy does (NaN true, -0.0 false): it
       builds, and its output is bool. */
    CHECK_OK(kiln_op_new("binary_erosion", &op));
    kiln_graph *gb = NULL;
    CHECK_OK(kiln_op_build(op, KILN_F32, shape, 4, &gb));
    kiln_tensor_info binfo;
    CHECK_OK(kiln_graph_output(gb, 0, &binfo));
    CHECK(binfo.dtype == KILN_BOOL, "binary_erosion output dtype %d", (int)binfo.dtype);
    kiln_graph_free(gb);
    kiln_op_free(op);
    CHECK_OK(kiln_op_new("median_blur", &op));
    kiln_graph *g2 = NULL;
    CHECK_ERR(kiln_op_build(op, KILN_F32, shape, 4, &g2), KILN_ERR_PARAM, "k");
    CHECK_OK(kiln_op_set_int(op, "k", 3));
    CHECK_ERR(kiln_op_build(op, KILN_U8, shape, 4, &g2), KILN_ERR_BUILD, "f32 or f64");
    kiln_op_free(op);

    CHECK_ERR(kiln_graph_parse("%0 = input 0 : f32[1,1,4,4]\n%1 = frobnicate %0\nreturn %1\n", &g2),
              KILN_ERR_PARSE, "2:");
    CHECK_ERR(kiln_graph_parse(NULL, &g2), KILN_ERR_NULL_POINTER, "text");
    CHECK(g2 == NULL, "no graph on failure");

    kiln_tensor_info info;
    size_t count;
    CHECK_ERR(kiln_graph_input(g, 1, &info), KILN_ERR_INVALID_ARGUMENT, "out of range");
    CHECK_ERR(kiln_graph_output(g, 0, NULL), KILN_ERR_NULL_POINTER, "info");
    CHECK_ERR(kiln_graph_num_inputs(NULL, &count), KILN_ERR_NULL_POINTER, "graph");
    CHECK_ERR(kiln_compile(NULL, g, &c), KILN_ERR_NULL_POINTER, "engine");
    CHECK_ERR(kiln_compile(engine, NULL, &c), KILN_ERR_NULL_POINTER, "graph");
    CHECK_ERR(kiln_compile(engine, g, NULL), KILN_ERR_NULL_POINTER, "out");
    CHECK_OK(kiln_compile(engine, g, &c));
    CHECK_OK(kiln_compiled_kernel_count(c, &count));
    CHECK(count >= 1, "kernel count %zu", count);

    float x[64] = {0}, y[64], big[128];
    const size_t other[4] = {1, 1, 8, 9};
    kiln_buffer in = buf(x, KILN_F32, shape, 4, NULL), out = buf(y, KILN_F32, shape, 4, NULL);
    kiln_buffer bad_shape = buf(x, KILN_F32, other, 4, NULL);
    kiln_buffer bad_dtype = buf(x, KILN_F64, shape, 4, NULL);
    kiln_buffer bad_code = buf(x, (kiln_dtype)99, shape, 4, NULL);
    kiln_buffer null_data = buf(NULL, KILN_F32, shape, 4, NULL);
    kiln_buffer null_shape = buf(x, KILN_F32, NULL, 4, NULL);
    kiln_buffer huge_rank = buf(x, KILN_F32, shape, (size_t)1 << 40, NULL);
    const int64_t overflow[4] = {1, 1, INT64_MAX / 2, 1};
    kiln_buffer bad_strides = buf(big, KILN_F32, shape, 4, overflow);
    CHECK_ERR(kiln_run(c, &bad_shape, 1, &out, 1), KILN_ERR_SHAPE, "input 0");
    CHECK_ERR(kiln_run(c, &in, 1, &bad_shape, 1), KILN_ERR_SHAPE, "output 0");
    CHECK_ERR(kiln_run(c, &bad_dtype, 1, &out, 1), KILN_ERR_SHAPE, "f64");
    CHECK_ERR(kiln_run(c, &bad_code, 1, &out, 1), KILN_ERR_INVALID_ARGUMENT, "dtype code 99");
    CHECK_ERR(kiln_run(c, &null_data, 1, &out, 1), KILN_ERR_NULL_POINTER, "input 0.data");
    CHECK_ERR(kiln_run(c, &null_shape, 1, &out, 1), KILN_ERR_NULL_POINTER, "shape");
    CHECK_ERR(kiln_run(c, &huge_rank, 1, &out, 1), KILN_ERR_SHAPE, "KILN_MAX_RANK");
    CHECK_ERR(kiln_run(c, &bad_strides, 1, &out, 1), KILN_ERR_SHAPE, "overflow");
    CHECK_ERR(kiln_run(c, &in, 2, &out, 1), KILN_ERR_SHAPE, "2 buffers");
    CHECK_ERR(kiln_run(c, &in, 1, &out, 0), KILN_ERR_SHAPE, "outputs");
    CHECK_ERR(kiln_run(c, NULL, 1, &out, 1), KILN_ERR_NULL_POINTER, "inputs");
    CHECK_ERR(kiln_run(NULL, &in, 1, &out, 1), KILN_ERR_NULL_POINTER, "compiled");
    CHECK_ERR(kiln_run_eager(g, &in, 1, &bad_dtype, 1), KILN_ERR_SHAPE, "output 0");
    CHECK_OK(kiln_run(c, &in, 1, &out, 1));
    CHECK(kiln_last_error()[0] == '\0', "success after failures clears the message");

    kiln_engine_free(NULL);
    kiln_op_free(NULL);
    kiln_graph_free(NULL);
    kiln_compiled_free(NULL);
    kiln_string_free(NULL);
    passed++; /* freeing NULL handles is a no-op */
    kiln_compiled_free(c);
    kiln_graph_free(g);
}

static void test_version(void) {
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", KILN_VERSION_MAJOR, KILN_VERSION_MINOR,
             KILN_VERSION_PATCH);
    CHECK(!strcmp(kiln_version(), want), "version %s vs header %s", kiln_version(), want);
    CHECK(kiln_version_number() == KILN_VERSION_NUMBER, "version number %u",
          kiln_version_number());
    CHECK(!strcmp(kiln_status_name(KILN_ERR_SHAPE), "KILN_ERR_SHAPE"), "status name");
    CHECK(!strcmp(kiln_status_name(KILN_ERR_INTERNAL), "KILN_ERR_INTERNAL"), "status name");
    CHECK(!strcmp(kiln_status_name(-3), "KILN_UNKNOWN_STATUS"), "unknown status name");
    CHECK(kiln_last_error() != NULL && kiln_last_error()[0] == '\0', "no error yet");
}

int main(void) {
    test_version();
    CHECK_OK(kiln_engine_new(&engine));
    test_errors();
    test_hand_references();
    test_ir_text();
    test_layouts();
    test_bool_normalisation();
    test_ops_all_dtypes();
    test_threads();
    kiln_engine_free(engine);
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
