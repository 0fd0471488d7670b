/*
 * test_aot_emit.c: runs the objects and headers of `kiln aot build --emit obj,h` (manifest
 * tests/c/aot_emit/kernels.toml) on generated images and compares them, byte for byte, with
 * what `kiln run --exec eager` (the oracle) wrote for the same images. Built and driven by
 * scripts/ci-c.sh with gcc under AddressSanitizer and UBSan:
 *
 *   test_aot_emit gen DIR     writes DIR/<case>.in.npy for every case
 *   (the script runs `kiln run ... --input DIR/<case>.in.npy --output DIR/<case>.expect.npy`)
 *   test_aot_emit check DIR   runs every case through the emitted code, compares with
 *                             DIR/<case>.expect.npy, prints "N passed, M failed"
 *
 * Scope: each set's operator function at its build shape, and two kernels' shape-free entry
 * (`kiln_<set>_k0_run`) at other shapes. Exactness: a comparison of bytes, so NaN payloads
 * and signed zeros count; the f32/f64 images hold NaN, infinities, -0 and subnormals.
 * Limits: little-endian hosts (the .npy files are written and read as "<" data).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "binary_erosion_bool.h"
#include "gradient_magnitude_f32.h"
#include "grey_dilation_u8.h"
#include "grey_erosion_u8.h"
#include "grey_opening_f32.h"
#include "median_blur_f32.h"
#include "median_filter_f32.h"
#include "morphological_laplace_f64.h"
#include "white_tophat_u8.h"

enum kind { F32, F64, U8, BOOL };

typedef int (*runner)(const int64_t *shape, const void *in, void *out);

typedef struct {
    const char *name;
    enum kind kind;
    int rank;
    int64_t shape[5];
    runner run;
} test_case;

static int r_median_blur(const int64_t *s, const void *i, void *o) { (void)s; return kiln_median_blur_f32(i, o); }
static int r_grey_erosion(const int64_t *s, const void *i, void *o) { (void)s; return kiln_grey_erosion_u8(i, o); }
static int r_gradient(const int64_t *s, const void *i, void *o) { (void)s; return kiln_gradient_magnitude_f32(i, o); }
static int r_opening(const int64_t *s, const void *i, void *o) { (void)s; return kiln_grey_opening_f32(i, o); }
static int r_tophat(const int64_t *s, const void *i, void *o) { (void)s; return kiln_white_tophat_u8(i, o); }
static int r_dilation(const int64_t *s, const void *i, void *o) { (void)s; return kiln_grey_dilation_u8(i, o); }
static int r_median3d(const int64_t *s, const void *i, void *o) { (void)s; return kiln_median_filter_f32(i, o); }
static int r_binary(const int64_t *s, const void *i, void *o) { (void)s; return kiln_binary_erosion_bool(i, o); }
static int r_laplace(const int64_t *s, const void *i, void *o) { (void)s; return kiln_morphological_laplace_f64(i, o); }
/* The shape-free kernel entry at a shape other than the build shape. */
static int r_median_k0(const int64_t *s, const void *i, void *o)
{
    const void *ins[] = {i};
    return kiln_median_blur_f32_k0_run(s, ins, o);
}
static int r_tophat_k0(const int64_t *s, const void *i, void *o)
{
    const void *ins[] = {i};
    return kiln_white_tophat_u8_k0_run(s, ins, o);
}

/* Names and parameters must match scripts/ci-c.sh's `kiln run` lines. */
static const test_case CASES[] = {
    {"median_blur_f32", F32, 4, {1, 2, 37, 53}, r_median_blur},
    {"grey_erosion_u8", U8, 4, {1, 1, 37, 53}, r_grey_erosion},
    {"gradient_magnitude_f32", F32, 4, {1, 1, 37, 53}, r_gradient},
    {"grey_opening_f32", F32, 4, {1, 1, 37, 53}, r_opening},
    {"white_tophat_u8", U8, 4, {2, 1, 21, 67}, r_tophat},
    {"grey_dilation_u8", U8, 4, {1, 1, 37, 53}, r_dilation},
    {"median_filter_f32", F32, 5, {1, 1, 6, 7, 40}, r_median3d},
    {"binary_erosion_bool", BOOL, 4, {1, 1, 37, 53}, r_binary},
    {"morphological_laplace_f64", F64, 4, {1, 1, 37, 53}, r_laplace},
    {"median_blur_f32_wide", F32, 4, {2, 1, 9, 200}, r_median_k0},
    {"white_tophat_u8_tall", U8, 4, {1, 3, 70, 5}, r_tophat_k0},
};
#define NCASES (sizeof CASES / sizeof CASES[0])

static size_t elem_size(enum kind k) { return k == F64 ? 8 : k == F32 ? 4 : 1; }
static const char *descr(enum kind k)
{
    return k == F64 ? "<f8" : k == F32 ? "<f4" : k == U8 ? "|u1" : "|b1";
}
static size_t numel(const test_case *c)
{
    size_t n = 1;
    for (int a = 0; a < c->rank; a++)
        n *= (size_t)c->shape[a];
    return n;
}

static uint64_t rng_state;
static uint64_t next_u64(void)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return rng_state >> 11;
}

/* Deterministic data: specials every few elements for floats, 85% ones for bool. */
static void fill(const test_case *c, void *buf)
{
    size_t n = numel(c);
    rng_state = 0x9e3779b97f4a7c15ULL ^ (uint64_t)strlen(c->name);
    for (size_t i = 0; i < n; i++) {
        uint64_t r = next_u64();
        double v = ((double)(r % 2000001) - 1000000.0) / 8192.0;
        unsigned pick = (unsigned)(next_u64() % 29);
        switch (c->kind) {
        case U8:
            ((uint8_t *)buf)[i] = (uint8_t)r;
            break;
        case BOOL:
            ((uint8_t *)buf)[i] = (r % 100) < 85;
            break;
        case F32: {
            float f = (float)v;
            uint32_t bits;
            memcpy(&bits, &f, 4);
            if (pick == 0) bits = 0x7fc00000u;      /* NaN */
            else if (pick == 1) bits = 0xffc00001u; /* NaN with sign and payload */
            else if (pick == 2) bits = 0x80000000u; /* -0 */
            else if (pick == 3) bits = 0x7f800000u; /* +inf */
            else if (pick == 4) bits = 0xff800000u; /* -inf */
            else if (pick == 5) bits = 0x00000003u; /* subnormal */
            memcpy((uint8_t *)buf + 4 * i, &bits, 4);
            break;
        }
        case F64: {
            uint64_t bits;
            memcpy(&bits, &v, 8);
            if (pick == 0) bits = 0x7ff8000000000000ull;
            else if (pick == 1) bits = 0x8000000000000000ull;
            else if (pick == 2) bits = 0xfff0000000000000ull;
            else if (pick == 3) bits = 0x0000000000000005ull;
            memcpy((uint8_t *)buf + 8 * i, &bits, 8);
            break;
        }
        }
    }
}

static char *path_of(const char *dir, const char *name, const char *suffix)
{
    size_t len = strlen(dir) + strlen(name) + strlen(suffix) + 2;
    char *p = malloc(len);
    if (p)
        snprintf(p, len, "%s/%s%s", dir, name, suffix);
    return p;
}

static void shape_text(const test_case *c, char *out, size_t cap)
{
    /* numpy's repr of the shape tuple: "(1, 2, 3)", "(5,)". */
    size_t used = (size_t)snprintf(out, cap, "(");
    for (int a = 0; a < c->rank && used < cap; a++)
        used += (size_t)snprintf(out + used, cap - used, a ? ", %lld" : "%lld",
                                 (long long)c->shape[a]);
    if (used < cap)
        snprintf(out + used, cap - used, c->rank == 1 ? ",)" : ")");
}

static int write_npy(const char *path, const test_case *c, const void *data)
{
    char shape[128], header[256];
    shape_text(c, shape, sizeof shape);
    int len = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                       descr(c->kind), shape);
    int total = 10 + len + 1;
    int pad = (64 - total % 64) % 64;
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    uint16_t hl = (uint16_t)(len + pad + 1);
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    fwrite(&hl, 2, 1, f);
    fwrite(header, 1, (size_t)len, f);
    for (int i = 0; i < pad; i++)
        fputc(' ', f);
    fputc('\n', f);
    size_t n = numel(c) * elem_size(c->kind);
    int ok = fwrite(data, 1, n, f) == n;
    return (fclose(f) == 0 && ok) ? 0 : -1;
}

/* Reads a .npy file written by kiln (format 1.0 or 2.0) into a fresh buffer after checking
 * that its dtype and shape are the case's. NULL (with a message) otherwise. */
static uint8_t *read_npy(const char *path, const test_case *c)
{
    FILE *f = fopen(path, "rb");
    uint8_t pre[12];
    uint8_t *data = NULL;
    char *header = NULL;
    if (!f) {
        fprintf(stderr, "%s: cannot open\n", path);
        return NULL;
    }
    if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0) {
        fprintf(stderr, "%s: not a .npy file\n", path);
        goto out;
    }
    size_t hl = (size_t)pre[8] | ((size_t)pre[9] << 8);
    if (pre[6] == 2) {
        if (fread(pre + 10, 1, 2, f) != 2)
            goto out;
        hl |= ((size_t)pre[10] << 16) | ((size_t)pre[11] << 24);
    }
    header = calloc(hl + 1, 1);
    if (!header || fread(header, 1, hl, f) != hl)
        goto out;
    char want_descr[32], shape[128], want_shape[160];
    snprintf(want_descr, sizeof want_descr, "'descr': '%s'", descr(c->kind));
    shape_text(c, shape, sizeof shape);
    snprintf(want_shape, sizeof want_shape, "'shape': %s", shape);
    if (!strstr(header, want_descr) || !strstr(header, want_shape)) {
        fprintf(stderr, "%s: header %s does not hold %s and %s\n", path, header, want_descr,
                want_shape);
        goto out;
    }
    size_t n = numel(c) * elem_size(c->kind);
    data = malloc(n + 1);
    if (!data || fread(data, 1, n + 1, f) != n) {
        fprintf(stderr, "%s: not exactly %zu data bytes\n", path, n);
        free(data);
        data = NULL;
    }
out:
    free(header);
    fclose(f);
    return data;
}

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[1], "gen") != 0 && strcmp(argv[1], "check") != 0)) {
        fprintf(stderr, "usage: %s gen|check DIR\n", argv[0]);
        return 2;
    }
    int gen = strcmp(argv[1], "gen") == 0;
    int passed = 0, failed = 0;
    for (size_t k = 0; k < NCASES; k++) {
        const test_case *c = &CASES[k];
        size_t bytes = numel(c) * elem_size(c->kind);
        uint8_t *in = malloc(bytes), *out = malloc(bytes);
        char *pin = path_of(argv[2], c->name, ".in.npy");
        char *pexp = path_of(argv[2], c->name, ".expect.npy");
        if (!in || !out || !pin || !pexp) {
            fprintf(stderr, "out of memory\n");
            return 2;
        }
        fill(c, in);
        if (gen) {
            if (write_npy(pin, c, in) != 0) {
                fprintf(stderr, "%s: cannot write\n", pin);
                failed++;
            }
        } else {
            /* A marker the output must overwrite completely. */
            memset(out, 0xa5, bytes);
            int rc = c->run(c->shape, in, out);
            uint8_t *want = read_npy(pexp, c);
            if (rc != 0 || !want) {
                fprintf(stderr, "FAIL %s: rc %d%s\n", c->name, rc, want ? "" : ", no expected data");
                failed++;
            } else if (memcmp(out, want, bytes) != 0) {
                size_t i = 0;
                while (out[i] == want[i])
                    i++;
                size_t es = elem_size(c->kind);
                fprintf(stderr, "FAIL %s: first differing element %zu (byte %zu): got %02x, want %02x\n",
                        c->name, i / es, i, out[i], want[i]);
                failed++;
            } else {
                printf("ok %s (%zu bytes)\n", c->name, bytes);
                passed++;
            }
            free(want);
        }
        free(in);
        free(out);
        free(pin);
        free(pexp);
    }
    if (!gen)
        printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
