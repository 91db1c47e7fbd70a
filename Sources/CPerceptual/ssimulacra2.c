// SSIMULACRA 2.1 (Structural SIMilarity Unveiling Local And Compression Related Artifacts), a
// perceptual metric by Jon Sneyers (Cloudinary), 2022–2023. The algorithm, its constants and its
// 108 weights are those of libjxl's tools/ssimulacra2.cc (https://github.com/libjxl/libjxl,
// BSD-3-Clause, Copyright (c) the JPEG XL Project Authors); this is a reimplementation in C,
// not a copy of that code. What it computes, in libjxl's order:
//   8-bit sRGB → linear RGB (alpha blended first, in sRGB, over the background of the pass) →
//   XYB (the opsin absorbance matrix and bias, cube root, minus the bias's cube root) made
//   positive (B − Y + 0.55, 14·X + 0.42, Y + 0.01); at each of up to 6 scales (each halved
//   from the last by 2×2 averaging in linear RGB, edges clamped), per channel: the SSIM error
//   map without SSIM's luminance denominator (2.1's formula), and the two edge maps (artifacts:
//   the distorted image has edges the original lacks; detail lost: the reverse), each pooled by
//   its 1-norm and 4-norm; the weighted sum of the 108 norms mapped to a score (a cubic, then
//   100 − 10·x^0.6276).
// Where it differs from libjxl, and why:
//   - The Gaussian blur (σ 1.5) is the Python port's (PyPI ssimulacra2 0.3.0, the test suite's
//     oracle, which must agree to within 1 point): an 11-tap sampled Gaussian (SciPy's, cut at
//     3.33σ), zeros beyond the left and right edges, the image mirrored beyond the top and bottom
//     (the port pads "vertically" with zeros and mirrors the other axis, but its XYB arrays are
//     transposed). libjxl runs a recursive filter (Charalampidis 2016, N = 5) whose response is a
//     9-tap kernel, Σᵢ βᵢ·cos(ωᵢ·k) for |k| ≤ 4, with zeros beyond every edge. The two differ
//     by more than a point: at the coarse scales, a few dozen pixels tall, the edges weigh a lot
//     (libjxl's zeros score JPEG q60 photographs 0.3–1 point higher, q30 up to 2), and the
//     kernels differ on hard edges under blur (2 points on a silhouette) and on strong
//     distortions (libjxl's tank pair, 1448×1080: 17.5 with libjxl's blur, 21.2 with this one;
//     the Rust port tests for 17.40). Scores here mostly run a little below libjxl's.
//   - The cube root: Halley's iteration from a bit-level first guess (float precision), where
//     libjxl uses its own fast approximation.
//   - sRGB decoding: the IEC 61966-2-1 curve (a 256-entry table for 8-bit values), where libjxl
//     goes through its colour management system; the same curve.
//   - Images under 8×8 are an error here (HC_SSIM2_TOO_SMALL); libjxl scores them 100 (no scale).
//     Above that, scales are taken as libjxl takes them: a scale is computed when the one before
//     is 8×8 or more (so the last may be 4–7 pixels; the Python port stops a scale earlier, which
//     changes scores of images under 225 pixels a side).
//   - A reference whose alpha is 255 everywhere is prepared once (blending is the identity).
// Memory: a reference holds 12 floats per pixel over all scales (XYB, its blur and its variance
// map: 9 planes, ×4/3 for the smaller scales), 48 bytes a pixel, twice that with transparency.
// Preparing and scoring run a row at a time; besides rows (about 140 floats per column) they
// keep the next scales' linear RGB, 0.94 floats a pixel (3.75 bytes).
#include "perceptual.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// A scale's passes are compiled three times, for x86-64-v4 (AVX-512: Skylake-SP, Ice Lake, Zen 4
// and later), x86-64-v3 (AVX2 and FMA: Haswell, Zen and later) and the baseline, and the loader
// picks one for the CPU (an ifunc, as the resampler does); their row helpers are inlined into
// each copy, to be compiled for its CPU. v4 and v3 compute the same FMAs in the same order (the
// sums' lanes are fixed by LANES, not by the vector width: the same score to 12 digits where
// measured), v4 about 14 % faster on a Sapphire Rapids core (an 800×532 score: 9.9 against
// 11.5 ms, best of 12). FMA rounds a multiply-add once, so scores differ from the baseline's in
// the fourth or fifth digit.
#define HOT __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#define INLINE __attribute__((always_inline)) inline

enum { NUM_SCALES = 6, RADIUS = 5, RING = 2 * RADIUS + 1 };

/// Lanes of the per-row sums: independent partial sums the compiler can keep in vector registers
/// (one running sum would have to be added in order).
enum { LANES = 8 };

/// One scale of a reference, planes of `width` × `height` floats, X, Y and B one after another.
typedef struct {
    size_t width, height;
    float *xyb; ///< the image in positive XYB
    float *mu;  ///< its blur
    float *var; ///< blur(xyb²) − mu²
} ref_scale;

/// A reference prepared over one background.
typedef struct {
    ref_scale scale[NUM_SCALES];
} ref_set;

struct hc_ssim2_reference {
    size_t width, height;
    int scales;
    /// The backgrounds a score is taken over (the worst counts): 0.1 and 0.9 for a reference with
    /// alpha, 0.5 (used only for a distorted image's alpha) otherwise.
    int backgrounds;
    float background[2];
    /// Which set each background uses: the same one when the reference is opaque.
    int set_of[2];
    ref_set set[2];
    float taps[RADIUS + 1];
    float *block;
    size_t bytes;
};

/// The per-scale norms, in libjxl's layout: ssim[c·2 + n], edge[c·4 + n] (artifacts) and
/// edge[c·4 + 2 + n] (detail lost), n = 0 for the 1-norm, 1 for the 4-norm.
typedef struct {
    double ssim[6];
    double edge[12];
} scale_norms;

static const float kC2 = 0.0009f;

// MARK: - Sizes

static int mul_ok(size_t a, size_t b, size_t *out) {
    if (a != 0 && b > SIZE_MAX / a) return 0;
    *out = a * b;
    return 1;
}

/// Sizes of the scales libjxl computes: scale s (s ≥ 1) is taken when scale s − 1 is at least
/// 8×8 (its loop checks the previous scale's size before halving).
static int scale_sizes(size_t width, size_t height, size_t w[NUM_SCALES], size_t h[NUM_SCALES]) {
    int n = 1;
    w[0] = width;
    h[0] = height;
    for (int s = 1; s < NUM_SCALES; s++) {
        if (w[s - 1] < 8 || h[s - 1] < 8) break;
        w[s] = (w[s - 1] + 1) / 2;
        h[s] = (h[s - 1] + 1) / 2;
        n++;
    }
    return n;
}

static int check_image(const uint8_t *pixels, size_t width, size_t height, size_t stride, int channels) {
    if (!pixels || (channels != 3 && channels != 4)) return HC_SSIM2_INVALID_ARGUMENT;
    if (width < 8 || height < 8) return HC_SSIM2_TOO_SMALL;
    size_t row, planes;
    if (!mul_ok(width, (size_t)channels, &row) || stride < row) return HC_SSIM2_INVALID_ARGUMENT;
    // Every count below (planes of floats, their sums over the scales) stays under SIZE_MAX.
    if (!mul_ok(width, height, &planes) || !mul_ok(planes, 64 * sizeof(float), &planes)) return HC_SSIM2_NO_MEMORY;
    return HC_SSIM2_OK;
}

static int opaque(const uint8_t *pixels, size_t width, size_t height, size_t stride, int channels) {
    if (channels == 3) return 1;
    for (size_t y = 0; y < height; y++) {
        const uint8_t *row = pixels + y * stride;
        for (size_t x = 0; x < width; x++)
            if (row[x * 4 + 3] != 255) return 0;
    }
    return 1;
}

// MARK: - Colour

static double srgb_to_linear(double v) { return v <= 0.04045 ? v / 12.92 : pow((v + 0.055) / 1.055, 2.4); }

/// 8-bit sRGB pixels, read a row at a time as linear RGB, blended over a background.
typedef struct {
    const uint8_t *pixels;
    size_t stride;
    int channels;
    float background;        ///< sRGB, 0–1
    float linear_background; ///< the same, linear
    float table[256];        ///< 8-bit sRGB → linear
} source;

static void source_init(source *src, const uint8_t *pixels, size_t stride, int channels, float background) {
    src->pixels = pixels;
    src->stride = stride;
    src->channels = channels;
    src->background = background;
    src->linear_background = (float)srgb_to_linear(background);
    for (int i = 0; i < 256; i++) src->table[i] = (float)srgb_to_linear(i / 255.0);
}

/// Row `y` as linear R, G and B.
INLINE static void source_row(const source *src, size_t y, size_t width, float *r, float *g, float *b) {
    const uint8_t *row = src->pixels + y * src->stride;
    const float *table = src->table;
    if (src->channels == 3) {
        for (size_t x = 0; x < width; x++) {
            r[x] = table[row[x * 3]];
            g[x] = table[row[x * 3 + 1]];
            b[x] = table[row[x * 3 + 2]];
        }
        return;
    }
    const float bg = src->background;
    for (size_t x = 0; x < width; x++) {
        const uint8_t *p = row + x * 4;
        if (p[3] == 255) {
            r[x] = table[p[0]];
            g[x] = table[p[1]];
            b[x] = table[p[2]];
        } else if (p[3] == 0) {
            r[x] = g[x] = b[x] = src->linear_background;
        } else {
            // libjxl's AlphaBlend, on the decoded (still gamma-encoded) values.
            const float a = p[3] / 255.0f;
            r[x] = (float)srgb_to_linear(a * (p[0] / 255.0f) + (1.0f - a) * bg);
            g[x] = (float)srgb_to_linear(a * (p[1] / 255.0f) + (1.0f - a) * bg);
            b[x] = (float)srgb_to_linear(a * (p[2] / 255.0f) + (1.0f - a) * bg);
        }
    }
}

/// The cube root of x ≥ 0 to float precision: a first guess from the exponent bits (within a few
/// percent), then two steps of Halley's method (cubic convergence).
static inline float cube_root(float x) {
    uint32_t i;
    memcpy(&i, &x, sizeof i);
    i = i / 3 + 709921077u;
    float y;
    memcpy(&y, &i, sizeof y);
    for (int k = 0; k < 2; k++) {
        const float y3 = y * y * y;
        y = y * (y3 + 2.0f * x) / (2.0f * y3 + x);
    }
    return x > 0.0f ? y : 0.0f;
}

/// A row of linear RGB → positive XYB (libjxl's ToXYB, then MakePositiveXYB). The output may be
/// the input.
INLINE static void xyb_row(const float *r, const float *g, const float *b, size_t n, float *ox, float *oy, float *ob) {
    // The opsin absorbance matrix and bias (libjxl lib/jxl/cms/opsin_params.h), as floats.
    const float m00 = 0.30f, m02 = 0.078f, m01 = 1.0f - m02 - m00;
    const float m10 = 0.23f, m12 = 0.078f, m11 = 1.0f - m12 - m10;
    const float m20 = 0.24342268924547819f, m21 = 0.20476744424496821f, m22 = 1.0f - m20 - m21;
    const float bias = 0.0037930732552754493f;
    const float bias_root = cbrtf(bias);
    for (size_t i = 0; i < n; i++) {
        float l = m00 * r[i] + m01 * g[i] + m02 * b[i] + bias;
        float m = m10 * r[i] + m11 * g[i] + m12 * b[i] + bias;
        float s = m20 * r[i] + m21 * g[i] + m22 * b[i] + bias;
        l = cube_root(l > 0.0f ? l : 0.0f) - bias_root;
        m = cube_root(m > 0.0f ? m : 0.0f) - bias_root;
        s = cube_root(s > 0.0f ? s : 0.0f) - bias_root;
        const float x = 0.5f * (l - m), y = 0.5f * (l + m);
        ox[i] = x * 14.0f + 0.42f;
        oy[i] = y + 0.01f;
        ob[i] = (s - y) + 0.55f;
    }
}

/// Row `y` (of `height`) of a plane into the next scale's row y / 2, a 2×2 box average in
/// libjxl's order ((a + b) + c) + d, the last row and column repeated when the size is odd.
INLINE static void downsample_row(const float *in, size_t width, size_t y, size_t height, float *out) {
    const size_t pairs = width / 2;
    if (y % 2 == 0) {
        for (size_t x = 0; x < pairs; x++) out[x] = (0.0f + in[2 * x]) + in[2 * x + 1];
        if (width & 1) out[pairs] = (0.0f + in[width - 1]) + in[width - 1];
    }
    if (y % 2 == 1 || y + 1 == height) {
        for (size_t x = 0; x < pairs; x++) out[x] = (out[x] + in[2 * x] + in[2 * x + 1]) * 0.25f;
        if (width & 1) out[pairs] = (out[pairs] + in[width - 1] + in[width - 1]) * 0.25f;
    }
}

// MARK: - Blur

/// The taps 0…RADIUS of the Gaussian (σ 1.5): sampled, cut at 3.33σ (5 pixels) and normalised,
/// as SciPy's gaussian_filter makes it for the Python port.
static void gaussian_taps(float taps[RADIUS + 1]) {
    const double sigma = 1.5;
    double t[RADIUS + 1], sum = 0.0;
    for (int k = 0; k <= RADIUS; k++) {
        t[k] = exp(-0.5 * k * k / (sigma * sigma));
        sum += k ? 2.0 * t[k] : t[k];
    }
    for (int k = 0; k <= RADIUS; k++) taps[k] = (float)(t[k] / sum);
}

/// Blurs `in` horizontally into `out` (zeros beyond the ends); `padded` holds width + 2·RADIUS.
INLINE static void blur_row(const float taps[RADIUS + 1], const float *in, size_t w, float *padded, float *out) {
    float *p = padded + RADIUS;
    memset(padded, 0, RADIUS * sizeof(float));
    memcpy(p, in, w * sizeof(float));
    memset(p + w, 0, RADIUS * sizeof(float));
    const float k0 = taps[0], k1 = taps[1], k2 = taps[2], k3 = taps[3], k4 = taps[4], k5 = taps[5];
    for (ptrdiff_t x = 0; x < (ptrdiff_t)w; x++)
        out[x] = k0 * p[x] + k1 * (p[x - 1] + p[x + 1]) + k2 * (p[x - 2] + p[x + 2]) + k3 * (p[x - 3] + p[x + 3]) +
                 k4 * (p[x - 4] + p[x + 4]) + k5 * (p[x - 5] + p[x + 5]);
}

/// The vertical pass for output row `y` of a ring of horizontally blurred rows (row k in slot
/// k mod RING). Rows beyond the top and bottom are the image's own, mirrored (row −1 is row 0,
/// row h is row h − 1, and again for images shorter than the kernel), as in the Python port.
/// Every row the window needs is still in the ring: within RADIUS of `y` when the image is
/// taller than RADIUS, and all of them when it is shorter than RING.
INLINE static void blur_column(const float taps[RADIUS + 1], const float *ring, size_t w, size_t y, size_t height,
                        float *restrict out) {
    const float *row[RING];
    const ptrdiff_t h = (ptrdiff_t)height;
    for (int j = 0; j < RING; j++) {
        ptrdiff_t k = (ptrdiff_t)y + j - RADIUS;
        while (k < 0 || k >= h) k = k < 0 ? -k - 1 : 2 * h - 1 - k;
        row[j] = ring + ((size_t)k % RING) * w;
    }
    const float k0 = taps[0], k1 = taps[1], k2 = taps[2], k3 = taps[3], k4 = taps[4], k5 = taps[5];
    const float *m5 = row[0], *m4 = row[1], *m3 = row[2], *m2 = row[3], *m1 = row[4], *c = row[5];
    const float *p1 = row[6], *p2 = row[7], *p3 = row[8], *p4 = row[9], *p5 = row[10];
    for (size_t x = 0; x < w; x++)
        out[x] = k0 * c[x] + k1 * (m1[x] + p1[x]) + k2 * (m2[x] + p2[x]) + k3 * (m3[x] + p3[x]) + k4 * (m4[x] + p4[x]) +
                 k5 * (m5[x] + p5[x]);
}

// MARK: - Rows

/// What a pass keeps besides the reference: rows (for the full width) and the next scales'
/// linear RGB.
typedef struct {
    float *linear[3];    ///< the current row of linear RGB (scale 0)
    float *xyb[3];       ///< per channel, the last RING rows of XYB (slot y mod RING)
    float *ring[3][3];   ///< per channel and signal, the last RING rows blurred horizontally
    float *out[3];       ///< per signal, the blurred row
    float *padded;       ///< a row with RADIUS zeros either side
    float *product;      ///< a product row
    float *terms;        ///< 3 rows of per-pixel terms, rounded up to LANES
    float *planes[2];    ///< the linear planes of scales 1 and 2 (3, 5 reuse 1's; 4 reuses 2's)
    float *block, *linear_block;
} rows;

static void rows_free(rows *r) {
    free(r->block);
    free(r->linear_block);
}

/// Allocates the rows and planes of passes over `ref`'s scales (0 when out of memory).
static int rows_new(rows *r, const hc_ssim2_reference *ref) {
    const size_t width = ref->width;
    size_t sizes[2];
    for (int i = 0; i < 2; i++)
        sizes[i] = ref->scales > i + 1 ? 3 * ref->set[0].scale[i + 1].width * ref->set[0].scale[i + 1].height : 0;
    const size_t count = (3 + 3 * RING + 9 * RING + 3 + 1) * width + (width + 2 * RADIUS) + 3 * (width + LANES);
    r->block = malloc(count * sizeof(float));
    r->linear_block = malloc((sizes[0] + sizes[1] + 1) * sizeof(float));
    if (!r->block || !r->linear_block) {
        rows_free(r);
        return 0;
    }
    r->planes[0] = r->linear_block;
    r->planes[1] = r->linear_block + sizes[0];
    float *p = r->block;
    for (int c = 0; c < 3; c++, p += width) r->linear[c] = p;
    for (int c = 0; c < 3; c++, p += RING * width) r->xyb[c] = p;
    for (int c = 0; c < 3; c++)
        for (int k = 0; k < 3; k++, p += RING * width) r->ring[c][k] = p;
    for (int k = 0; k < 3; k++, p += width) r->out[k] = p;
    r->product = p;
    p += width;
    r->padded = p;
    p += width + 2 * RADIUS;
    r->terms = p;
    return 1;
}

/// One scale's input: the pixels (scale 0) or the linear planes the scale before left.
typedef struct {
    const source *pixels;
    float *planes;
    size_t width, height;
    float *next; ///< where the next scale's linear planes go (NULL at the last scale)
} scale_input;

/// Reads row `y` as linear RGB, adds it to the next scale's planes and writes it as XYB to
/// `ox`, `oy` and `ob`.
INLINE static void input_row(const scale_input *in, rows *r, size_t y, float *ox, float *oy, float *ob) {
    const size_t w = in->width, h = in->height, plane = w * h;
    float *lin[3];
    if (in->pixels) {
        for (int c = 0; c < 3; c++) lin[c] = r->linear[c];
        source_row(in->pixels, y, w, lin[0], lin[1], lin[2]);
    } else {
        for (size_t c = 0; c < 3; c++) lin[c] = in->planes + c * plane + y * w;
    }
    if (in->next) {
        const size_t nw = (w + 1) / 2, nplane = nw * ((h + 1) / 2);
        for (size_t c = 0; c < 3; c++) downsample_row(lin[c], w, y, h, in->next + c * nplane + (y / 2) * nw);
    }
    xyb_row(lin[0], lin[1], lin[2], w, ox, oy, ob);
}

// MARK: - Reference

static size_t floats_per_set(const hc_ssim2_reference *ref) {
    size_t total = 0;
    for (int s = 0; s < ref->scales; s++) total += 9 * ref->set[0].scale[s].width * ref->set[0].scale[s].height;
    return total;
}

/// One scale of a set: its XYB planes, their blurs and variance maps, a row at a time.
HOT static void prepare_scale(const float taps[RADIUS + 1], ref_scale *sc, const scale_input *in, rows *r) {
    const size_t w = sc->width, h = sc->height, n = w * h;
    for (size_t yy = 0; yy < h + RADIUS; yy++) {
        if (yy < h) {
            float *x = sc->xyb + yy * w;
            input_row(in, r, yy, x, x + n, x + 2 * n);
            for (size_t c = 0; c < 3; c++) {
                const float *a = x + c * n;
                const size_t slot = (yy % RING) * w;
                blur_row(taps, a, w, r->padded, r->ring[c][0] + slot);
                for (size_t i = 0; i < w; i++) r->product[i] = a[i] * a[i];
                blur_row(taps, r->product, w, r->padded, r->ring[c][1] + slot);
            }
        }
        if (yy < RADIUS) continue;
        const size_t y = yy - RADIUS;
        for (size_t c = 0; c < 3; c++) {
            float *m = sc->mu + c * n + y * w, *v = sc->var + c * n + y * w;
            blur_column(taps, r->ring[c][0], w, y, h, m);
            blur_column(taps, r->ring[c][1], w, y, h, v);
            for (size_t i = 0; i < w; i++) v[i] -= m[i] * m[i];
        }
    }
}

/// Prepares a set from the pixels blended over a background.
static void prepare_set(hc_ssim2_reference *ref, ref_set *set, const source *pixels, rows *r) {
    scale_input in = {pixels, NULL, 0, 0, NULL};
    for (int s = 0; s < ref->scales; s++) {
        in.width = set->scale[s].width;
        in.height = set->scale[s].height;
        in.next = s + 1 < ref->scales ? r->planes[s % 2] : NULL;
        prepare_scale(ref->taps, &set->scale[s], &in, r);
        in.pixels = NULL;
        in.planes = in.next;
    }
}

int hc_ssim2_reference_new(const uint8_t *pixels, size_t width, size_t height, size_t stride, int channels,
                           hc_ssim2_reference **out) {
    if (!out) return HC_SSIM2_INVALID_ARGUMENT;
    *out = NULL;
    int status = check_image(pixels, width, height, stride, channels);
    if (status != HC_SSIM2_OK) return status;

    hc_ssim2_reference *ref = calloc(1, sizeof *ref);
    if (!ref) return HC_SSIM2_NO_MEMORY;
    ref->width = width;
    ref->height = height;
    gaussian_taps(ref->taps);
    size_t w[NUM_SCALES], h[NUM_SCALES];
    ref->scales = scale_sizes(width, height, w, h);
    for (int i = 0; i < 2; i++)
        for (int s = 0; s < ref->scales; s++) {
            ref->set[i].scale[s].width = w[s];
            ref->set[i].scale[s].height = h[s];
        }
    // libjxl's tool: an image with alpha is scored over a dark and a light background, the
    // worse counts; without, a distorted image's alpha is blended over 0.5.
    const int transparent = !opaque(pixels, width, height, stride, channels);
    if (channels == 4) {
        ref->backgrounds = 2;
        ref->background[0] = 0.1f;
        ref->background[1] = 0.9f;
        ref->set_of[1] = transparent ? 1 : 0;
    } else {
        ref->backgrounds = 1;
        ref->background[0] = 0.5f;
    }
    const int sets = transparent ? 2 : 1;
    ref->bytes = (size_t)sets * floats_per_set(ref) * sizeof(float);
    if (!(ref->block = malloc(ref->bytes))) {
        free(ref);
        return HC_SSIM2_NO_MEMORY;
    }
    ref->bytes += sizeof *ref;
    float *p = ref->block;
    for (int i = 0; i < sets; i++)
        for (int s = 0; s < ref->scales; s++) {
            ref_scale *sc = &ref->set[i].scale[s];
            const size_t n = 3 * sc->width * sc->height;
            sc->xyb = p;
            sc->mu = p + n;
            sc->var = p + 2 * n;
            p += 3 * n;
        }

    rows r;
    if (!rows_new(&r, ref)) {
        hc_ssim2_reference_free(ref);
        return HC_SSIM2_NO_MEMORY;
    }
    for (int i = 0; i < sets; i++) {
        source src;
        source_init(&src, pixels, stride, channels, ref->background[i]);
        prepare_set(ref, &ref->set[i], &src, &r);
    }
    rows_free(&r);
    *out = ref;
    return HC_SSIM2_OK;
}

size_t hc_ssim2_reference_bytes(const hc_ssim2_reference *ref) { return ref ? ref->bytes : 0; }

void hc_ssim2_reference_free(hc_ssim2_reference *ref) {
    if (!ref) return;
    free(ref->block);
    free(ref);
}

// MARK: - Scoring

/// Adds `v` and its 4th powers to the lanes of `sum` and `sum4` (`w` a multiple of LANES).
INLINE static void add_lanes(const float *v, size_t w, float sum[LANES], float sum4[LANES]) {
    for (size_t i = 0; i < w; i += LANES)
        for (int l = 0; l < LANES; l++) {
            const float x = v[i + (size_t)l], x2 = x * x;
            sum[l] += x;
            sum4[l] += x2 * x2;
        }
}

/// The sums of one row of one channel: the SSIM error (2.1: no luminance denominator; 1 − SSIM
/// as an error), the edge ratio's artifact part and its detail-lost part, each with its 4th
/// power. `terms` holds 3 rows rounded up to LANES.
INLINE static void row_terms(const float *m1, const float *v1, const float *a, const float *m2, const float *s22,
                      const float *s12, const float *b, size_t w, float *terms, double sum[6]) {
    const size_t padded = (w + LANES - 1) / LANES * LANES;
    float *d = terms, *artifact = terms + padded, *lost = terms + 2 * padded;
    for (size_t i = 0; i < w; i++) {
        const float num_m = 1.0f - (m1[i] - m2[i]) * (m1[i] - m2[i]);
        const float num_s = 2.0f * (s12[i] - m1[i] * m2[i]) + kC2;
        const float den_s = v1[i] + (s22[i] - m2[i] * m2[i]) + kC2;
        const float e = 1.0f - num_m * num_s / den_s;
        d[i] = e > 0.0f ? e : 0.0f;
    }
    for (size_t i = 0; i < w; i++) {
        const float e = (1.0f + fabsf(b[i] - m2[i])) / (1.0f + fabsf(a[i] - m1[i])) - 1.0f;
        artifact[i] = e > 0.0f ? e : 0.0f;
        lost[i] = e < 0.0f ? -e : 0.0f;
    }
    for (size_t i = w; i < padded; i++) d[i] = artifact[i] = lost[i] = 0.0f;
    float acc[6][LANES] = {{0}};
    add_lanes(d, padded, acc[0], acc[1]);
    add_lanes(artifact, padded, acc[2], acc[3]);
    add_lanes(lost, padded, acc[4], acc[5]);
    for (int k = 0; k < 6; k++) {
        double row = 0.0;
        for (int l = 0; l < LANES; l++) row += acc[k][l];
        sum[k] += row;
    }
}

/// One scale: the distorted image's XYB rows, their blurs and the products' against the
/// reference, and the norms.
HOT static void score_scale(const float taps[RADIUS + 1], const ref_scale *sc, const scale_input *in, rows *r,
                        scale_norms *norms) {
    const size_t w = sc->width, h = sc->height, n = w * h;
    double sum[3][6] = {{0}};
    for (size_t yy = 0; yy < h + RADIUS; yy++) {
        if (yy < h) {
            const size_t slot = (yy % RING) * w;
            input_row(in, r, yy, r->xyb[0] + slot, r->xyb[1] + slot, r->xyb[2] + slot);
            for (size_t c = 0; c < 3; c++) {
                const float *a = sc->xyb + c * n + yy * w, *b = r->xyb[c] + slot;
                blur_row(taps, b, w, r->padded, r->ring[c][0] + slot);
                for (size_t i = 0; i < w; i++) r->product[i] = b[i] * b[i];
                blur_row(taps, r->product, w, r->padded, r->ring[c][1] + slot);
                for (size_t i = 0; i < w; i++) r->product[i] = a[i] * b[i];
                blur_row(taps, r->product, w, r->padded, r->ring[c][2] + slot);
            }
        }
        if (yy < RADIUS) continue;
        const size_t y = yy - RADIUS;
        for (size_t c = 0; c < 3; c++) {
            for (int k = 0; k < 3; k++) blur_column(taps, r->ring[c][k], w, y, h, r->out[k]);
            const size_t at = c * n + y * w;
            row_terms(sc->mu + at, sc->var + at, sc->xyb + at, r->out[0], r->out[1], r->out[2],
                      r->xyb[c] + (y % RING) * w, w, r->terms, sum[c]);
        }
    }
    const double per_pixel = 1.0 / (double)n;
    for (int c = 0; c < 3; c++) {
        norms->ssim[c * 2] = per_pixel * sum[c][0];
        norms->ssim[c * 2 + 1] = sqrt(sqrt(per_pixel * sum[c][1]));
        norms->edge[c * 4] = per_pixel * sum[c][2];
        norms->edge[c * 4 + 1] = sqrt(sqrt(per_pixel * sum[c][3]));
        norms->edge[c * 4 + 2] = per_pixel * sum[c][4];
        norms->edge[c * 4 + 3] = sqrt(sqrt(per_pixel * sum[c][5]));
    }
}

/// libjxl's Msssim::Score: the weighted sum of the norms, in its order (channel, scale, norm;
/// with fewer than 6 scales the weights run on, as there), then the mapping to a score.
static double final_score(const scale_norms *norms, int scales) {
    static const double weight[108] = {
        0.0, 0.0007376606707406586, 0.0, 0.0, 0.0007793481682867309, 0.0,
        0.0, 0.0004371155730107379, 0.0, 1.1041726426657346, 0.00066284834129271, 0.00015231632783718752,
        0.0, 0.0016406437456599754, 0.0, 1.8422455520539298, 11.441172603757666, 0.0,
        0.0007989109436015163, 0.000176816438078653, 0.0, 1.8787594979546387, 10.94906990605142, 0.0,
        0.0007289346991508072, 0.9677937080626833, 0.0, 0.00014003424285435884, 0.9981766977854967, 0.00031949755934435053,
        0.0004550992113792063, 0.0, 0.0, 0.0013648766163243398, 0.0, 0.0,
        0.0, 0.0, 0.0, 7.466890328078848, 0.0, 17.445833984131262,
        0.0006235601634041466, 0.0, 0.0, 6.683678146179332, 0.00037724407979611296, 1.027889937768264,
        225.20515300849274, 0.0, 0.0, 19.213238186143016, 0.0011401524586618361, 0.001237755635509985,
        176.39317598450694, 0.0, 0.0, 24.43300999870476, 0.28520802612117757, 0.0004485436923833408,
        0.0, 0.0, 0.0, 34.77906344483772, 44.835625328877896, 0.0,
        0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
        0.0, 0.0008680556573291698, 0.0, 0.0, 0.0, 0.0,
        0.0, 0.0005313191874358747, 0.0, 0.00016533814161379112, 0.0, 0.0,
        0.0, 0.0, 0.0, 0.0004179171803251336, 0.0017290828234722833, 0.0,
        0.0020827005846636437, 0.0, 0.0, 8.826982764996862, 23.19243343998926, 0.0,
        95.1080498811086, 0.9863978034400682, 0.9834382792465353, 0.0012286405048278493, 171.2667255897307, 0.9807858872435379,
        0.0, 0.0, 0.0, 0.0005130064588990679, 0.0, 0.00010854057858411537,
    };
    double ssim = 0.0;
    size_t i = 0;
    for (int c = 0; c < 3; c++)
        for (int s = 0; s < scales; s++)
            for (int n = 0; n < 2; n++) {
                ssim += weight[i++] * fabs(norms[s].ssim[c * 2 + n]);
                ssim += weight[i++] * fabs(norms[s].edge[c * 4 + n]);
                ssim += weight[i++] * fabs(norms[s].edge[c * 4 + n + 2]);
            }
    ssim *= 0.9562382616834844;
    ssim = 2.326765642916932 * ssim - 0.020884521182843837 * ssim * ssim + 6.248496625763138e-05 * ssim * ssim * ssim;
    return ssim > 0.0 ? 100.0 - 10.0 * pow(ssim, 0.6276336467831387) : 100.0;
}

/// One pass: the distorted pixels blended over a background, against one set.
static double score_set(const hc_ssim2_reference *ref, const ref_set *set, const source *pixels, rows *r) {
    scale_norms norms[NUM_SCALES];
    scale_input in = {pixels, NULL, 0, 0, NULL};
    for (int s = 0; s < ref->scales; s++) {
        in.width = set->scale[s].width;
        in.height = set->scale[s].height;
        in.next = s + 1 < ref->scales ? r->planes[s % 2] : NULL;
        score_scale(ref->taps, &set->scale[s], &in, r, &norms[s]);
        in.pixels = NULL;
        in.planes = in.next;
    }
    return final_score(norms, ref->scales);
}

int hc_ssim2_score(const hc_ssim2_reference *ref, const uint8_t *pixels, size_t width, size_t height, size_t stride,
                   int channels, double *score) {
    if (!ref || !score) return HC_SSIM2_INVALID_ARGUMENT;
    int status = check_image(pixels, width, height, stride, channels);
    if (status != HC_SSIM2_OK) return status;
    if (width != ref->width || height != ref->height) return HC_SSIM2_SIZE_MISMATCH;

    rows r;
    if (!rows_new(&r, ref)) return HC_SSIM2_NO_MEMORY;
    const int distorted_opaque = opaque(pixels, width, height, stride, channels);
    double worst = INFINITY;
    for (int b = 0; b < ref->backgrounds; b++) {
        // Against an opaque reference, an opaque image scores the same over any background.
        if (b > 0 && ref->set_of[b] == ref->set_of[0] && distorted_opaque) break;
        source src;
        source_init(&src, pixels, stride, channels, ref->background[b]);
        const double s = score_set(ref, &ref->set[ref->set_of[b]], &src, &r);
        worst = s < worst ? s : worst;
    }
    rows_free(&r);
    *score = worst;
    return HC_SSIM2_OK;
}
