// The direct lane's separable resampler on 8-bit RGB(A): the loops of `Resampler.resample`
// (HalcyonImage/Resampler.swift), which computes the filter weights and hands them here.
// The arithmetic is that function's, step for step and in the same order (products not fused),
// so both give the same samples; here the row conversions and the column pass are loops the
// compiler vectorizes, eight floats at a time on AVX2.

#include "image_codecs.h"

#include <stdlib.h>
#include <string.h>

#pragma clang fp contract(off)

typedef float hc_v4 __attribute__((ext_vector_type(4)));

// Source samples → float pixels, premultiplied by alpha when there is one.
static inline void resample_load(const uint8_t *p, long columns, int channels, hc_v4 *row) {
    if (channels == 4) {
        for (long x = 0; x < columns; x++) {
            const uint8_t *q = p + x * 4;
            float a = (float)q[3], k = a / 255.0f;
            row[x] = (hc_v4){(float)q[0] * k, (float)q[1] * k, (float)q[2] * k, a};
        }
    } else {
        for (long x = 0; x < columns; x++) {
            const uint8_t *q = p + x * 3;
            row[x] = (hc_v4){(float)q[0], (float)q[1], (float)q[2], 255.0f};
        }
    }
}

// Clamped to 0…255 and rounded to nearest (+0.5 and truncation: the value is not negative).
static inline uint8_t resample_sample(float v) {
    return v > 0 ? (uint8_t)(int)((v < 255.0f ? v : 255.0f) + 0.5f) : 0;
}

// Float pixels → samples, alpha un-premultiplied.
static inline void resample_store(const float *row, long count, int channels, uint8_t *q) {
    for (long x = 0; x < count; x++) {
        const float *v = row + x * 4;
        uint8_t *o = q + x * channels;
        if (channels == 4) {
            uint8_t a = resample_sample(v[3]);
            float k = a > 0 ? 255.0f / v[3] : 0;
            o[0] = resample_sample(v[0] * k);
            o[1] = resample_sample(v[1] * k);
            o[2] = resample_sample(v[2] * k);
            o[3] = a;
        } else {
            o[0] = resample_sample(v[0]);
            o[1] = resample_sample(v[1]);
            o[2] = resample_sample(v[2]);
        }
    }
}

// Built twice, for AVX2 and for any x86-64, chosen by the CPU at load time (as the Gaussian).
#if defined(__x86_64__) && defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
int hc_resample_u8(const uint8_t *source, size_t source_stride, long source_height, int channels, const long *h_start,
                   const long *h_count, const float *h_weights, long h_stride, long out_width, const long *v_start,
                   const long *v_count, const float *v_weights, long v_stride, long out_height, uint8_t *target,
                   size_t target_stride) {
    if (out_width <= 0 || out_height <= 0 || (channels != 3 && channels != 4)) return -1;
    long first_column = h_start[0], end_column = 0, ring_rows = 1, first_row = v_start[0];
    for (long i = 0; i < out_width; i++) {
        if (h_start[i] < first_column) first_column = h_start[i];
        if (h_start[i] + h_count[i] > end_column) end_column = h_start[i] + h_count[i];
    }
    for (long i = 0; i < out_height; i++) {
        if (v_count[i] > ring_rows) ring_rows = v_count[i];
        if (v_start[i] < first_row) first_row = v_start[i];
    }
    long columns = end_column - first_column;
    if (columns <= 0) return -1;
    hc_v4 *row = malloc((size_t)columns * sizeof(hc_v4));
    hc_v4 *ring = malloc((size_t)ring_rows * (size_t)out_width * sizeof(hc_v4));
    float *sums = malloc((size_t)out_width * sizeof(hc_v4));
    if (!row || !ring || !sums) {
        free(row);
        free(ring);
        free(sums);
        return -1;
    }
    long filtered = first_row;  // the next source row to filter into the ring
    for (long oy = 0; oy < out_height; oy++) {
        long first = v_start[oy], end = first + v_count[oy];
        if (end > source_height) end = source_height;
        // Rows: each source row the output row reads, filtered across into its ring slot once.
        for (; filtered < end; filtered++) {
            resample_load(source + (size_t)filtered * source_stride + (size_t)first_column * (size_t)channels, columns, channels, row);
            hc_v4 *out = ring + (filtered % ring_rows) * out_width;
            for (long ox = 0; ox < out_width; ox++) {
                const hc_v4 *s = row + (h_start[ox] - first_column);
                const float *w = h_weights + ox * h_stride;
                // Four sums, as the Swift loop keeps them, added in the same order.
                hc_v4 a0 = 0, a1 = 0, a2 = 0, a3 = 0;
                long n = h_count[ox], k = 0;
                for (; k + 3 < n; k += 4) {
                    a0 += s[k] * w[k];
                    a1 += s[k + 1] * w[k + 1];
                    a2 += s[k + 2] * w[k + 2];
                    a3 += s[k + 3] * w[k + 3];
                }
                for (; k < n; k++) a0 += s[k] * w[k];
                out[ox] = (a0 + a1) + (a2 + a3);
            }
        }
        // Columns: the ring's rows weighted down, as flat floats.
        long count = out_width * 4;
        memset(sums, 0, (size_t)count * sizeof(float));
        const float *w = v_weights + oy * v_stride;
        for (long k = 0; k < end - first; k++) {
            const float *line = (const float *)(ring + ((first + k) % ring_rows) * out_width);
            float wk = w[k];
            for (long i = 0; i < count; i++) sums[i] += line[i] * wk;
        }
        resample_store(sums, out_width, channels, target + (size_t)oy * target_stride);
    }
    free(row);
    free(ring);
    free(sums);
    return 0;
}
