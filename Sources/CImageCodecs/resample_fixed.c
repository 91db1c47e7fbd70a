// The direct lane's resize of opaque 8-bit RGB in 16-bit fixed point: the same Lanczos weights
// `Resampler` computes (hc_resample_u8 takes them as floats), rounded to integers that sum to
// exactly 2^shift, multiplied in pairs with AVX2's multiply-add of 16-bit lanes into 32-bit sums;
// the rows between the two passes are 8-bit, clamped, as Pillow keeps them, and the pass down
// goes first when that costs less (shrinking). The portable loops below compute the same
// integers in the same way (integer sums do not depend on their order), so both give the same
// samples; the AVX2 ones are chosen at run time when the CPU has it.
//
// Bounds: a weight fits in 16 bits and a sum in 32 — `fixed_shift` picks the largest shift for
// which every weight, and 255 times every output's sum of |weights|, stay inside them.

#include "image_codecs.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__clang__)
#include <immintrin.h>
#define HC_FIXED_AVX2 1
#endif

// One axis's weights as integers: `stride` (a multiple of 4) per output index, zero past its count.
typedef struct {
    int16_t *w;
    long stride;
    int shift;
} fixed_table;

static long round_up(long n, long multiple) { return (n + multiple - 1) / multiple * multiple; }

// The largest shift ≤ 22 at which the table's largest weight (plus the rounding fix-up) fits in
// a signed 16-bit lane and 255 × an output's Σ|weights| plus the rounding term in a signed 32-bit
// sum, with room to spare. -1 when no shift of at least 6 does (the weights are not a filter).
static int fixed_shift(const float *weights, const long *count, long stride, long n) {
    double largest = 0, reach = 0, most = 0;
    for (long i = 0; i < n; i++) {
        if ((double)count[i] > most) most = (double)count[i];
        double total = 0;
        for (long k = 0; k < count[i]; k++) {
            double a = fabs((double)weights[i * stride + k]);
            if (a > largest) largest = a;
            total += a;
        }
        if (total > reach) reach = total;
    }
    for (int shift = 22; shift >= 6; shift--) {
        double unit = (double)(1L << shift);
        // The rounding fix-up moves the largest weight by at most half a unit a weight.
        if (largest * unit + most <= 32767 && (reach * unit + most) * 255 + unit <= 2147483647.0 / 2) return shift;
    }
    return -1;
}

// Rounds each output's weights to multiples of 2^-shift and puts what the rounding lost or added
// on its largest weight, so a flat area stays exactly as flat.
static int fixed_table_make(const float *weights, const long *count, long stride, long n, fixed_table *t) {
    t->shift = fixed_shift(weights, count, stride, n);
    if (t->shift < 0) return -1;
    long most = 0;
    for (long i = 0; i < n; i++)
        if (count[i] > most) most = count[i];
    t->stride = round_up(most + 1, 4);
    t->w = calloc((size_t)(n * t->stride), sizeof(int16_t));
    if (!t->w) return -1;
    long unit = 1L << t->shift;
    for (long i = 0; i < n; i++) {
        int16_t *q = t->w + i * t->stride;
        long sum = 0, top = 0;
        for (long k = 0; k < count[i]; k++) {
            q[k] = (int16_t)lrint((double)weights[i * stride + k] * (double)unit);
            sum += q[k];
            if (abs(q[k]) > abs(q[top])) top = k;
        }
        if (count[i] > 0) q[top] = (int16_t)(q[top] + (unit - sum));
    }
    return 0;
}

static inline uint8_t fixed_sample(int32_t sum, int shift) {
    int32_t v = (sum + (1 << (shift - 1))) >> shift;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

// One row across: `row` holds the source columns from the first one read (and 32 spare bytes).
static void fixed_row_portable(const uint8_t *row, long first_column, const long *h_start, const long *h_count,
                               const fixed_table *h, long out_width, uint8_t *out) {
    for (long ox = 0; ox < out_width; ox++) {
        const uint8_t *s = row + (h_start[ox] - first_column) * 3;
        const int16_t *w = h->w + ox * h->stride;
        int32_t r = 0, g = 0, b = 0;
        for (long k = 0; k < h_count[ox]; k++) {
            r += s[3 * k] * w[k];
            g += s[3 * k + 1] * w[k];
            b += s[3 * k + 2] * w[k];
        }
        out[3 * ox] = fixed_sample(r, h->shift);
        out[3 * ox + 1] = fixed_sample(g, h->shift);
        out[3 * ox + 2] = fixed_sample(b, h->shift);
    }
}

// One output row down: samples `from..<to` of `n` rows weighted by `w`.
static void fixed_column_portable(const uint8_t *const *rows, const int16_t *w, long n, int shift, long from, long to,
                                  uint8_t *out) {
    for (long x = from; x < to; x++) {
        int32_t sum = 0;
        for (long k = 0; k < n; k++) sum += rows[k][x] * w[k];
        out[x] = fixed_sample(sum, shift);
    }
}

#if HC_FIXED_AVX2
// Four taps an iteration: two pixels in each 128-bit half, spread to 16-bit lanes as
// (r0 r1 g0 g1 b0 b1 0 0) and multiplied by the pair (w0 w1) — one 32-bit sum per channel.
__attribute__((target("avx2"))) static void fixed_row_avx2(const uint8_t *row, long first_column, const long *h_start,
                                                           const long *h_count, const fixed_table *h, long out_width,
                                                           uint8_t *out) {
    const __m256i spread = _mm256_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1,  //
                                            0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1);
    const __m256i pairs = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
    const __m128i half = _mm_set1_epi32(1 << (h->shift - 1));
    for (long ox = 0; ox < out_width; ox++) {
        const uint8_t *s = row + (h_start[ox] - first_column) * 3;
        const int16_t *w = h->w + ox * h->stride;
        __m256i sum = _mm256_setzero_si256();
        for (long k = 0; k < h_count[ox]; k += 4) {
            __m128i lo = _mm_loadu_si128((const __m128i *)(s + 3 * k));
            __m128i hi = _mm_loadu_si128((const __m128i *)(s + 3 * k + 6));
            __m256i px = _mm256_shuffle_epi8(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1), spread);
            __m256i ws = _mm256_permutevar8x32_epi32(_mm256_castsi128_si256(_mm_loadl_epi64((const __m128i *)(w + k))), pairs);
            sum = _mm256_add_epi32(sum, _mm256_madd_epi16(px, ws));
        }
        __m128i v = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
        v = _mm_srai_epi32(_mm_add_epi32(v, half), h->shift);
        v = _mm_packus_epi16(_mm_packs_epi32(v, v), v);
        int32_t px3 = _mm_cvtsi128_si32(v);
        memcpy(out + 3 * ox, &px3, 4);  // the 4th byte is the next pixel's, written after
    }
}

// 32 samples and two rows an iteration: the rows' bytes interleaved, spread to 16 bits and
// multiplied by the pair of weights (`n` is even). The in-lane unpacks and packs undo each
// other's order. `bytes` is a multiple of 32.
__attribute__((target("avx2"))) static void fixed_column_avx2(const uint8_t *const *rows, const int16_t *w, long n, int shift,
                                                              long bytes, uint8_t *out) {
    const __m256i zero = _mm256_setzero_si256(), half = _mm256_set1_epi32(1 << (shift - 1));
    for (long x = 0; x < bytes; x += 32) {
        __m256i s0 = zero, s1 = zero, s2 = zero, s3 = zero;
        for (long k = 0; k < n; k += 2) {
            __m256i a = _mm256_loadu_si256((const __m256i *)(rows[k] + x));
            __m256i b = _mm256_loadu_si256((const __m256i *)(rows[k + 1] + x));
            __m256i ws = _mm256_set1_epi32((int32_t)((uint32_t)(uint16_t)w[k] | (uint32_t)(uint16_t)w[k + 1] << 16));
            __m256i lo = _mm256_unpacklo_epi8(a, b), hi = _mm256_unpackhi_epi8(a, b);
            s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(_mm256_unpacklo_epi8(lo, zero), ws));
            s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(_mm256_unpackhi_epi8(lo, zero), ws));
            s2 = _mm256_add_epi32(s2, _mm256_madd_epi16(_mm256_unpacklo_epi8(hi, zero), ws));
            s3 = _mm256_add_epi32(s3, _mm256_madd_epi16(_mm256_unpackhi_epi8(hi, zero), ws));
        }
        s0 = _mm256_srai_epi32(_mm256_add_epi32(s0, half), shift);
        s1 = _mm256_srai_epi32(_mm256_add_epi32(s1, half), shift);
        s2 = _mm256_srai_epi32(_mm256_add_epi32(s2, half), shift);
        s3 = _mm256_srai_epi32(_mm256_add_epi32(s3, half), shift);
        __m256i v = _mm256_packus_epi16(_mm256_packs_epi32(s0, s1), _mm256_packs_epi32(s2, s3));
        _mm256_storeu_si256((__m256i *)(out + x), v);
    }
}
#endif

// One output row down, `bytes` samples of `n` rows (`rows[n]` exists, for an odd count's
// partner): whole 32-byte blocks on AVX2, the rest (or all) by the portable loop, which reads
// nothing past `bytes` — the rows may be the source's own.
static void fixed_column(const uint8_t **rows, const int16_t *w, long n, int shift, long bytes, uint8_t *out, int avx2) {
    long done = 0;
#if HC_FIXED_AVX2
    if (avx2) {
        rows[n] = rows[n - 1];  // weighted 0 (the tables are zero past each count)
        done = bytes / 32 * 32;
        fixed_column_avx2(rows, w, (n + 1) / 2 * 2, shift, done, out);
    }
#else
    (void)avx2;
#endif
    fixed_column_portable(rows, w, n, shift, done, bytes, out);
}

// One row across into `out` (3 × out_width + 1 bytes); `row` has 32 + 3 × the table's stride
// readable bytes past its last column.
static void fixed_row(const uint8_t *row, long first_column, const long *h_start, const long *h_count, const fixed_table *h,
                      long out_width, uint8_t *out, int avx2) {
#if HC_FIXED_AVX2
    if (avx2) {
        fixed_row_avx2(row, first_column, h_start, h_count, h, out_width, out);
        return;
    }
#else
    (void)avx2;
#endif
    fixed_row_portable(row, first_column, h_start, h_count, h, out_width, out);
}

int hc_resample_rgb8_fixed(const uint8_t *source, size_t source_stride, long source_height, const long *h_start,
                           const long *h_count, const float *h_weights, long h_stride, long out_width, const long *v_start,
                           const long *v_count, const float *v_weights, long v_stride, long out_height, uint8_t *target,
                           size_t target_stride, int simd) {
    if (out_width <= 0 || out_height <= 0) return -1;
#if HC_FIXED_AVX2
    int avx2 = simd && __builtin_cpu_supports("avx2");
#else
    int avx2 = 0;
    (void)simd;
#endif
    long first_column = h_start[0], end_column = 0, ring_rows = 1, first_row = v_start[0], end_row = 0;
    double h_taps = 0, v_taps = 0;
    for (long i = 0; i < out_width; i++) {
        if (h_start[i] < first_column) first_column = h_start[i];
        if (h_start[i] + h_count[i] > end_column) end_column = h_start[i] + h_count[i];
        h_taps += (double)h_count[i];
    }
    for (long i = 0; i < out_height; i++) {
        if (v_count[i] > ring_rows) ring_rows = v_count[i];
        if (v_start[i] < first_row) first_row = v_start[i];
        if (v_start[i] + v_count[i] > end_row) end_row = v_start[i] + v_count[i];
        v_taps += (double)v_count[i];
    }
    if (end_row > source_height) end_row = source_height;
    long columns = end_column - first_column;
    if (columns <= 0 || end_row <= first_row) return -1;
    // Which pass first: a tap across costs about four of a tap down (the pass down takes 32
    // samples an instruction, the pass across one pixel). Shrinking, rows down first filter the
    // source once in the cheap direction; enlarging, across first touches fewer pixels.
    double down_first = v_taps * (double)columns + 4 * h_taps * (double)out_height;
    double across_first = 4 * h_taps * (double)(end_row - first_row) + v_taps * (double)out_width;
    int rows_first = down_first <= across_first;

    fixed_table h = {0}, v = {0};
    long line = out_width * 3 + 1;  // an output row, and the pixel-wide overrun of the AVX2 store
    long row_bytes = columns * 3 + 3 * (h_stride + 4) + 32;
    uint8_t *row = calloc((size_t)row_bytes, 1);  // a row across reads from (zero past its columns)
    uint8_t *ring = rows_first ? NULL : calloc((size_t)(ring_rows * line), 1);
    uint8_t *out = malloc((size_t)line);
    const uint8_t **rows = malloc((size_t)(ring_rows + 1) * sizeof(uint8_t *));
    int status = -1;
    if (!row || (!rows_first && !ring) || !out || !rows) goto done;
    if (fixed_table_make(h_weights, h_count, h_stride, out_width, &h) != 0) goto done;
    if (fixed_table_make(v_weights, v_count, v_stride, out_height, &v) != 0) goto done;
    long filtered = first_row;  // across first: the next source row to filter into the ring
    for (long oy = 0; oy < out_height; oy++) {
        long first = v_start[oy], end = first + v_count[oy];
        if (end > source_height) end = source_height;
        long n = end - first;
        if (n <= 0) goto done;
        const int16_t *w = v.w + oy * v.stride;
        if (rows_first) {
            // The source rows down into one row of the columns read, then across.
            for (long k = 0; k < n; k++) rows[k] = source + (size_t)(first + k) * source_stride + (size_t)first_column * 3;
            fixed_column(rows, w, n, v.shift, columns * 3, row, avx2);
            fixed_row(row, first_column, h_start, h_count, &h, out_width, out, avx2);
        } else {
            // Each source row across once, into the ring; the ring's rows down.
            for (; filtered < end; filtered++) {
                memcpy(row, source + (size_t)filtered * source_stride + (size_t)first_column * 3, (size_t)columns * 3);
                fixed_row(row, first_column, h_start, h_count, &h, out_width, ring + (filtered % ring_rows) * line, avx2);
            }
            for (long k = 0; k < n; k++) rows[k] = ring + ((first + k) % ring_rows) * line;
            fixed_column(rows, w, n, v.shift, out_width * 3, out, avx2);
        }
        memcpy(target + (size_t)oy * target_stride, out, (size_t)out_width * 3);
    }
    status = 0;
done:
    free(h.w);
    free(v.w);
    free(row);
    free(ring);
    free(out);
    free(rows);
    return status;
}
