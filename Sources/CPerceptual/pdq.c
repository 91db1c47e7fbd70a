// PDQ (see pdq.h). Float arithmetic in the reference's order — running sums along each row and
// column, the DCT's products summed from k = 0 up — so that the same pixels give the reference's
// bits, a coefficient on the median aside.
#include "pdq.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { GRID = 64, FREQUENCIES = 16, MIN_SIDE = 5, MAX_SIDE = HC_PDQ_MAX_SIDE, PAD = 16 };

// MARK: Luminance

// The reference's luma weights (Rec. 601), as floats.
static const float luma_r = 0.299f, luma_g = 0.587f, luma_b = 0.114f;

static float luma_at(const uint8_t *p, int channels) {
    if (channels < 3) return (float)p[0];
    return luma_r * (float)p[0] + luma_g * (float)p[1] + luma_b * (float)p[2];
}

// The luminance of every pixel, or of `fx`×`fy` blocks averaged when the image is over MAX_SIDE a
// side (partial blocks at the right and bottom edges average the pixels they have).
static float *luminance(const uint8_t *pixels, size_t width, size_t height, size_t stride, int channels, size_t *out_w,
                        size_t *out_h, size_t *out_stride) {
    size_t fx = (width + MAX_SIDE - 1) / MAX_SIDE, fy = (height + MAX_SIDE - 1) / MAX_SIDE;
    size_t w = (width + fx - 1) / fx, h = (height + fy - 1) / fy;
    // Rows PAD floats apart more than their width: rows a power of two apart would put the
    // eight rows a pass reads at once in the same cache sets.
    size_t ws = w + PAD;
    float *luma = malloc(ws * h * sizeof(float));
    if (!luma) return NULL;
    if (fx == 1 && fy == 1) {
        // A loop per layout, the stride a constant: the compiler vectorises each.
        for (size_t y = 0; y < h; y++) {
            const uint8_t *row = pixels + y * stride;
            float *out = luma + y * ws;
            switch (channels) {
            case 3:
                for (size_t x = 0; x < w; x++)
                    out[x] = luma_r * (float)row[3 * x] + luma_g * (float)row[3 * x + 1] + luma_b * (float)row[3 * x + 2];
                break;
            case 4:
                for (size_t x = 0; x < w; x++)
                    out[x] = luma_r * (float)row[4 * x] + luma_g * (float)row[4 * x + 1] + luma_b * (float)row[4 * x + 2];
                break;
            default:
                for (size_t x = 0; x < w; x++) out[x] = (float)row[x * (size_t)channels];
            }
        }
    } else {
        for (size_t by = 0; by < h; by++) {
            size_t y0 = by * fy, y1 = y0 + fy < height ? y0 + fy : height;
            for (size_t bx = 0; bx < w; bx++) {
                size_t x0 = bx * fx, x1 = x0 + fx < width ? x0 + fx : width;
                double sum = 0;
                for (size_t y = y0; y < y1; y++) {
                    const uint8_t *row = pixels + y * stride;
                    for (size_t x = x0; x < x1; x++) sum += luma_at(row + x * (size_t)channels, channels);
                }
                luma[by * ws + bx] = (float)(sum / (double)((y1 - y0) * (x1 - x0)));
            }
        }
    }
    *out_w = w;
    *out_h = h;
    *out_stride = ws;
    return luma;
}

// MARK: The box filter and the 64×64 decimation

// One box pass down every column at once, a row at a time: each output is the mean of the
// inputs from `window − half` before it to `half − 1` after it (half = (window + 2) / 2), the
// window cut at the ends; a running sum per column, added to below and taken from above, in the
// reference's order (the same floats). Row by row, the pass walks the buffer in order and the
// compiler vectorises it across the columns. `sums` holds `w` floats. `sums` holds `w` floats.
static void box_columns(const float *in, float *out, size_t w, size_t ws, size_t h, size_t window, float *sums) {
    size_t half = (window + 2) / 2;
    size_t left = 0, right = 0, o = 0, count = 0;
    for (size_t x = 0; x < w; x++) sums[x] = 0.0f;
    for (size_t i = 0; i + 1 < half && right < h; i++, count++, right++)
        for (size_t x = 0; x < w; x++) sums[x] += in[right * ws + x];
    for (size_t i = 0; i < window - half + 1 && right < h; i++, count++, right++, o++) {
        float n = (float)(count + 1);
        for (size_t x = 0; x < w; x++) {
            sums[x] += in[right * ws + x];
            out[o * ws + x] = sums[x] / n;
        }
    }
    for (; right < h; right++, left++, o++) {
        float n = (float)count;
        for (size_t x = 0; x < w; x++) {
            sums[x] += in[right * ws + x];
            sums[x] -= in[left * ws + x];
            out[o * ws + x] = sums[x] / n;
        }
    }
    for (; o < h; o++, left++, count--) {
        float n = (float)(count - 1);
        for (size_t x = 0; x < w; x++) {
            sums[x] -= in[left * ws + x];
            out[o * ws + x] = sums[x] / n;
        }
    }
}

// The same pass along `rows` rows (at most 8) at once: the strip is turned into 8 columns
// (`strip` holds 16 × w floats), passed down them as `box_columns` does — vectorised, each row's
// sums in its own order, the same floats — and turned back.
static void box_rows(const float *in, float *out, size_t w, size_t ws, size_t rows, size_t window, float *strip, float *sums) {
    float *across = strip, *passed = strip + 8 * w;
    for (size_t i = 0; i < w; i++)
        for (size_t r = 0; r < 8; r++) across[i * 8 + r] = r < rows ? in[r * ws + i] : 0.0f;
    box_columns(across, passed, 8, 8, w, window, sums);
    for (size_t r = 0; r < rows; r++)
        for (size_t i = 0; i < w; i++) out[r * ws + i] = passed[i * 8 + r];
}

// The last column pass where only the 64×64 grid is read: the same running sums down the 64
// columns the grid samples (each as `box_columns` computes it), kept at the 64 rows it samples.
static void box_columns_sampled(const float *in, size_t ws, size_t h, size_t window, const size_t xs[GRID], const size_t ys[GRID],
                                float grid[GRID][GRID]) {
    size_t half = (window + 2) / 2;
    for (int j = 0; j < GRID; j++) {
        const float *column = in + xs[j];
        size_t left = 0, right = 0, o = 0, count = 0;
        int next = 0;  // the next grid row to fill
        float sum = 0.0f, value;
        for (size_t i = 0; i + 1 < half && right < h; i++, count++, right++) sum += column[right * ws];
        for (size_t i = 0; i < window - half + 1 && right < h; i++, count++, right++, o++) {
            sum += column[right * ws];
            value = sum / (float)(count + 1);
            while (next < GRID && ys[next] == o) grid[next++][j] = value;
        }
        for (; right < h; right++, left++, o++) {
            sum += column[right * ws];
            sum -= column[left * ws];
            value = sum / (float)count;
            while (next < GRID && ys[next] == o) grid[next++][j] = value;
        }
        for (; o < h; o++, left++, count--) {
            sum -= column[left * ws];
            value = sum / (float)(count - 1);
            while (next < GRID && ys[next] == o) grid[next++][j] = value;
        }
    }
}

// The window of a pass that takes `size` samples to 64: half of what one output spans, rounded
// up (two passes each way make a tent over it).
static size_t window_for(size_t size) { return (size + 2 * GRID - 1) / (2 * GRID); }

// Two passes of boxes along the rows then the columns (`a` is the image, `b` and `sums`
// scratch), then the 64×64 samples at the centres of a 64×64 grid laid over the image.
static void downsample(float *a, float *b, float *sums, float *strip, size_t w, size_t ws, size_t h, float grid[GRID][GRID]) {
    size_t along_rows = window_for(w), along_columns = window_for(h);
    size_t xs[GRID], ys[GRID];
    for (int i = 0; i < GRID; i++) {
        ys[i] = (size_t)(((i + 0.5) * (double)h) / GRID);
        xs[i] = (size_t)(((i + 0.5) * (double)w) / GRID);
    }
    for (size_t y = 0; y < h; y += 8) box_rows(a + y * ws, b + y * ws, w, ws, h - y < 8 ? h - y : 8, along_rows, strip, sums);
    box_columns(b, a, w, ws, h, along_columns, sums);
    for (size_t y = 0; y < h; y += 8) box_rows(a + y * ws, b + y * ws, w, ws, h - y < 8 ? h - y : 8, along_rows, strip, sums);
    // The second column pass: only what the grid samples.
    box_columns_sampled(b, ws, h, along_columns, xs, ys, grid);
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

int hc_pdq_hash(const uint8_t *pixels, size_t width, size_t height, size_t stride, int channels, int transforms,
                uint8_t *hashes, int *quality) {
    if (!pixels || !hashes || !quality || channels < 1 || channels > 4 || transforms < 1 || transforms > HC_PDQ_TRANSFORMS)
        return HC_PDQ_INVALID_ARGUMENT;
    if (width > SIZE_MAX / (size_t)channels || stride < width * (size_t)channels) return HC_PDQ_INVALID_ARGUMENT;
    if (width < MIN_SIDE || height < MIN_SIDE) return HC_PDQ_TOO_SMALL;
    size_t w, h, ws;
    float *a = luminance(pixels, width, height, stride, channels, &w, &h, &ws);
    float *b = a ? malloc(ws * h * sizeof(float)) : NULL;
    float *sums = b ? malloc((w > 8 ? w : 8) * sizeof(float)) : NULL;
    float *strip = sums ? malloc(16 * w * sizeof(float)) : NULL;
    if (!strip) {
        free(a);
        free(b);
        free(sums);
        return HC_PDQ_NO_MEMORY;
    }
    float grid[GRID][GRID], coefficients[FREQUENCIES][FREQUENCIES], turned[FREQUENCIES][FREQUENCIES];
    downsample(a, b, sums, strip, w, ws, h, grid);
    free(a);
    free(b);
    free(sums);
    free(strip);
    *quality = quality_of(grid);
    dct(grid, coefficients);
    for (int t = 0; t < transforms; t++) {
        variant(t, coefficients, turned);
        bits(turned, hashes + (size_t)t * HC_PDQ_HASH_BYTES);
    }
    return HC_PDQ_OK;
}
