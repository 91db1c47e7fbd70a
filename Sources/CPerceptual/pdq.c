// PDQ (see pdq.h). The DCT's arithmetic is the reference's (float products summed from k = 0
// up); the blur's is the same filter summed another way (see "The box filter"), so a coefficient
// within a float's rounding of the median may land on its other side.
#include "pdq.h"

#pragma STDC FP_CONTRACT OFF

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { GRID = 64, FREQUENCIES = 16, MIN_SIDE = 5 };

// MARK: Luminance

// The reference's luma weights (Rec. 601), as floats.
static const float luma_r = 0.299f, luma_g = 0.587f, luma_b = 0.114f;

// The luminance of `n` pixels of one row. A loop per layout, the stride a constant: the
// compiler vectorises each.
static void luma_line(const uint8_t *row, size_t n, int channels, float *out) {
    switch (channels) {
    case 3:
        for (size_t x = 0; x < n; x++) out[x] = luma_r * (float)row[3 * x] + luma_g * (float)row[3 * x + 1] + luma_b * (float)row[3 * x + 2];
        break;
    case 4:
        for (size_t x = 0; x < n; x++) out[x] = luma_r * (float)row[4 * x] + luma_g * (float)row[4 * x + 1] + luma_b * (float)row[4 * x + 2];
        break;
    default:
        for (size_t x = 0; x < n; x++) out[x] = (float)row[x * (size_t)channels];
    }
}

// MARK: The box filter and the 64×64 decimation

// The reference blurs the whole image with two box passes along each axis (its "Jarosz"
// filter) and then reads 64×64 samples of it. The passes are linear and separable, so each
// sample is a weighted sum of the pixels near it: here, per sampled row (and column), the
// weights two passes give it, and only those sums are computed — the image is read once, a row
// at a time, and no blurred copy of it is made.

// One box pass over `n` samples: output `o` is the mean of the inputs from `o − (window − half)`
// to `o + half − 1` (half = (window + 2) / 2), the window cut at the ends — the reference's
// running sum, stated as the window it sums.
static void box_span(size_t n, size_t window, size_t o, size_t *first, size_t *last) {
    size_t half = (window + 2) / 2, before = window - half, after = half - 1;
    *first = o > before ? o - before : 0;
    *last = o + after < n ? o + after : n - 1;
}

// The window of a pass that takes `size` samples to 64: half of what one output spans, rounded
// up (two passes each way make a tent over it).
static size_t window_for(size_t size) { return (size + 2 * GRID - 1) / (2 * GRID); }

// The inputs one output of two passes reads, and its weight on each.
typedef struct {
    size_t first, last;
    float *weights;  // last − first + 1 of them
} taps;

// The most inputs one output of two passes reads: 2·window − 1.
static size_t taps_capacity(size_t n) { return 2 * window_for(n); }

// Output `o` of two passes over `n` samples, as weights on its inputs (`t->weights` holds
// `taps_capacity(n)` floats; `scratch` as many doubles, plus one). The first pass's outputs
// `k` that the second's output `o` averages each spread their share over their own window: a
// share added over a run, as a difference at its ends, then summed up.
static void two_pass_taps(size_t n, size_t o, taps *t, double *scratch) {
    size_t window = window_for(n), f, l;
    box_span(n, window, o, &f, &l);
    size_t lo, hi, ignore;
    box_span(n, window, f, &lo, &ignore);
    box_span(n, window, l, &ignore, &hi);
    for (size_t m = lo; m <= hi + 1; m++) scratch[m - lo] = 0;
    for (size_t k = f; k <= l; k++) {
        size_t kf, kl;
        box_span(n, window, k, &kf, &kl);
        double share = 1.0 / ((double)(l - f + 1) * (double)(kl - kf + 1));
        scratch[kf - lo] += share;
        scratch[kl + 1 - lo] -= share;
    }
    double running = 0;
    for (size_t m = lo; m <= hi; m++) {
        running += scratch[m - lo];
        t->weights[m - lo] = (float)running;
    }
    t->first = lo;
    t->last = hi;
}

// A hash in progress (see pdq.h): the weights of the 64 sampled rows and columns, and the
// sampled rows blurred down the columns so far.
struct hc_pdq_state {
    size_t width, height;
    size_t y;  // the next row to come
    int next;  // the first sampled row whose weights may reach it
    taps down[GRID], across[GRID];
    float *rows;     // 64 × width
    float *line;     // width: one row's luminance
    float *weights;  // the taps' weights
};

// Adds `count` rows to the 64 sampled rows whose weights reach them (in order, so those are a
// run from `next`). Built twice, for AVX2 and without, chosen when the program loads (the row
// loops run twice as fast in 256-bit registers; no FMA — see FP_CONTRACT — so both give the same
// floats).
#if defined(__x86_64__) && defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
static void add_rows(hc_pdq_state *s, const uint8_t *pixels, size_t stride, int channels, size_t count) {
    const size_t width = s->width;
    float *const line = s->line, *const rows = s->rows;
    const taps *const down = s->down;
    for (size_t r = 0; r < count; r++, s->y++) {
        const size_t y = s->y;
        while (s->next < GRID && down[s->next].last < y) s->next++;
        if (s->next == GRID) continue;
        if (down[s->next].first > y) continue;  // no sampled row reads this one
        luma_line(pixels + r * stride, width, channels, line);
        for (int i = s->next; i < GRID && down[i].first <= y; i++) {
            if (down[i].last < y) continue;
            const float k = down[i].weights[y - down[i].first];
            float *out = rows + (size_t)i * width;
            for (size_t x = 0; x < width; x++) out[x] += k * line[x];
        }
    }
}

// The 64×64 samples at the centres of a 64×64 grid laid over the blurred image: the sampled
// rows blurred across.
static void sample(const hc_pdq_state *s, float grid[GRID][GRID]) {
    for (int i = 0; i < GRID; i++) {
        const float *row = s->rows + (size_t)i * s->width;
        for (int j = 0; j < GRID; j++) {
            const taps *t = &s->across[j];
            float sum = 0.0f;
            for (size_t x = t->first; x <= t->last; x++) sum += t->weights[x - t->first] * row[x];
            grid[i][j] = sum;
        }
    }
}

// MARK: Quality, DCT, bits

// How much strong detail the 64×64 image has: each neighbour difference in percent of full
// scale (truncated), summed over both directions, over 90, at most 100.
static int quality_of(float grid[GRID][GRID]) {
    int sum = 0;
    for (int i = 0; i + 1 < GRID; i++)
        for (int j = 0; j < GRID; j++) sum += abs((int)(((grid[i][j] - grid[i + 1][j]) * 100) / 255));
    for (int i = 0; i < GRID; i++)
        for (int j = 0; j + 1 < GRID; j++) sum += abs((int)(((grid[i][j] - grid[i][j + 1]) * 100) / 255));
    int quality = sum / 90;
    return quality > 100 ? 100 : quality;
}

// out = D · grid · Dᵀ, D the 16×64 DCT-II basis of frequencies 1–16 (the constant one left out).
static void dct(float grid[GRID][GRID], float out[FREQUENCIES][FREQUENCIES]) {
    float basis[FREQUENCIES][GRID], half[FREQUENCIES][GRID];
    // The scale as a float, as the reference keeps it.
    const float scale = (float)sqrt(2.0 / GRID);
    const double pi = 3.14159265358979323846;
    for (int i = 0; i < FREQUENCIES; i++)
        for (int j = 0; j < GRID; j++) basis[i][j] = (float)(scale * cos(pi / 2.0 / GRID * (i + 1) * (2 * j + 1)));
    for (int i = 0; i < FREQUENCIES; i++) {
        for (int j = 0; j < GRID; j++) {
            float sum = 0.0f;
            for (int k = 0; k < GRID; k++) sum += basis[i][k] * grid[k][j];
            half[i][j] = sum;
        }
    }
    for (int i = 0; i < FREQUENCIES; i++) {
        for (int j = 0; j < FREQUENCIES; j++) {
            float sum = 0.0f;
            for (int k = 0; k < GRID; k++) sum += half[i][k] * basis[j][k];
            out[i][j] = sum;
        }
    }
}

static int ascending(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

// Bit (i, j) set when coefficient (i, j) is above the median (the 128th smallest); written as the
// reference prints its hash: row 15 first, each row's bit 15 first.
static void bits(float c[FREQUENCIES][FREQUENCIES], uint8_t out[HC_PDQ_HASH_BYTES]) {
    float sorted[FREQUENCIES * FREQUENCIES];
    memcpy(sorted, c, sizeof sorted);
    qsort(sorted, FREQUENCIES * FREQUENCIES, sizeof(float), ascending);
    float median = sorted[FREQUENCIES * FREQUENCIES / 2 - 1];
    for (int i = 0; i < FREQUENCIES; i++) {
        unsigned word = 0;
        for (int j = 0; j < FREQUENCIES; j++)
            if (c[i][j] > median) word |= 1u << j;
        out[2 * (FREQUENCIES - 1 - i)] = (uint8_t)(word >> 8);
        out[2 * (FREQUENCIES - 1 - i) + 1] = (uint8_t)(word & 0xFF);
    }
}

// A dihedral variant of the coefficients: a cosine of odd frequency changes sign when its axis is
// mirrored, and a quarter turn swaps the axes. Per variant: whether rows and columns swap, and
// which of the (row, column) frequencies' parities flip the sign.
static void variant(int which, float in[FREQUENCIES][FREQUENCIES], float out[FREQUENCIES][FREQUENCIES]) {
    // transpose; negate where the row index is even; where the column index is even; where the
    // sum is odd (stated on the input's indices).
    static const struct {
        int transpose, row_even, column_even, sum_odd;
    } rules[HC_PDQ_TRANSFORMS] = {
        [HC_PDQ_ORIGINAL] = {0, 0, 0, 0},   [HC_PDQ_ROTATE_90] = {1, 0, 1, 0}, [HC_PDQ_ROTATE_180] = {0, 0, 0, 1},
        [HC_PDQ_ROTATE_270] = {1, 1, 0, 0}, [HC_PDQ_FLIP_X] = {0, 1, 0, 0},    [HC_PDQ_FLIP_Y] = {0, 0, 1, 0},
        [HC_PDQ_FLIP_PLUS_1] = {1, 0, 0, 0}, [HC_PDQ_FLIP_MINUS_1] = {1, 0, 0, 1},
    };
    for (int i = 0; i < FREQUENCIES; i++) {
        for (int j = 0; j < FREQUENCIES; j++) {
            int negate = (rules[which].row_even && !(i & 1)) || (rules[which].column_even && !(j & 1)) ||
                         (rules[which].sum_odd && ((i + j) & 1));
            float v = negate ? -in[i][j] : in[i][j];
            if (rules[which].transpose) out[j][i] = v;
            else out[i][j] = v;
        }
    }
}

// MARK: The hash

void hc_pdq_free(hc_pdq_state *s) {
    if (!s) return;
    free(s->rows);
    free(s->line);
    free(s->weights);
    free(s);
}

int hc_pdq_begin(size_t width, size_t height, hc_pdq_state **out) {
    if (!out) return HC_PDQ_INVALID_ARGUMENT;
    *out = NULL;
    if (width < MIN_SIDE || height < MIN_SIDE) return HC_PDQ_TOO_SMALL;
    if (width > SIZE_MAX / sizeof(float) / GRID / 4 || height > SIZE_MAX / sizeof(float) / GRID / 4) return HC_PDQ_NO_MEMORY;
    size_t down_capacity = taps_capacity(height), across_capacity = taps_capacity(width);
    size_t capacity = down_capacity + across_capacity;
    hc_pdq_state *s = calloc(1, sizeof *s);
    double *scratch = s ? malloc((capacity + 1) * sizeof(double)) : NULL;
    if (s) {
        s->rows = calloc(GRID * width, sizeof(float));
        s->line = malloc(width * sizeof(float));
        s->weights = malloc(GRID * capacity * sizeof(float));
    }
    if (!s || !scratch || !s->rows || !s->line || !s->weights) {
        free(scratch);
        hc_pdq_free(s);
        return HC_PDQ_NO_MEMORY;
    }
    s->width = width;
    s->height = height;
    for (int i = 0; i < GRID; i++) {
        s->down[i].weights = s->weights + (size_t)i * down_capacity;
        s->across[i].weights = s->weights + GRID * down_capacity + (size_t)i * across_capacity;
        two_pass_taps(height, (size_t)(((i + 0.5) * (double)height) / GRID), &s->down[i], scratch);
        two_pass_taps(width, (size_t)(((i + 0.5) * (double)width) / GRID), &s->across[i], scratch);
    }
    free(scratch);
    *out = s;
    return HC_PDQ_OK;
}

int hc_pdq_rows(hc_pdq_state *s, const uint8_t *pixels, size_t stride, int channels, size_t count) {
    if (!s || (!pixels && count > 0) || channels < 1 || channels > 4) return HC_PDQ_INVALID_ARGUMENT;
    if (s->width > SIZE_MAX / (size_t)channels || stride < s->width * (size_t)channels || count > s->height - s->y)
        return HC_PDQ_INVALID_ARGUMENT;
    add_rows(s, pixels, stride, channels, count);
    return HC_PDQ_OK;
}

int hc_pdq_finish(hc_pdq_state *s, int transforms, uint8_t *hashes, int *quality) {
    if (!s || !hashes || !quality || transforms < 1 || transforms > HC_PDQ_TRANSFORMS || s->y != s->height)
        return HC_PDQ_INVALID_ARGUMENT;
    float grid[GRID][GRID], coefficients[FREQUENCIES][FREQUENCIES], turned[FREQUENCIES][FREQUENCIES];
    sample(s, grid);
    *quality = quality_of(grid);
    dct(grid, coefficients);
    for (int t = 0; t < transforms; t++) {
        variant(t, coefficients, turned);
        bits(turned, hashes + (size_t)t * HC_PDQ_HASH_BYTES);
    }
    return HC_PDQ_OK;
}

int hc_pdq_hash(const uint8_t *pixels, size_t width, size_t height, size_t stride, int channels, int transforms,
                uint8_t *hashes, int *quality) {
    if (!pixels || !hashes || !quality || channels < 1 || channels > 4 || transforms < 1 || transforms > HC_PDQ_TRANSFORMS)
        return HC_PDQ_INVALID_ARGUMENT;
    if (width > SIZE_MAX / (size_t)channels || stride < width * (size_t)channels) return HC_PDQ_INVALID_ARGUMENT;
    hc_pdq_state *s;
    int status = hc_pdq_begin(width, height, &s);
    if (status == HC_PDQ_OK) status = hc_pdq_rows(s, pixels, stride, channels, height);
    if (status == HC_PDQ_OK) status = hc_pdq_finish(s, transforms, hashes, quality);
    hc_pdq_free(s);
    return status;
}
