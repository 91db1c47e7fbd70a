// Perceptual image metrics in C: SSIMULACRA 2.1 (libjxl's tools/ssimulacra2.cc, reimplemented
// in ssimulacra2.c), for choosing an encoder's quality by a perceptual target.
//
// A reference is prepared once (its colour conversion and blurs at every scale) and then scores
// any number of distorted versions of itself. Everything a call needs is in its arguments and
// the reference, which a score only reads: calls are thread-safe, several threads may score
// against one reference at once. No global state.
#ifndef HALCYON_PERCEPTUAL_H
#define HALCYON_PERCEPTUAL_H

#include <stddef.h>
#include <stdint.h>

/// Return codes of the hc_ssim2 functions.
enum {
    HC_SSIM2_OK = 0,
    /// Narrower or shorter than 8 pixels: the metric's first scale needs 8×8 (the caller skips scoring).
    HC_SSIM2_TOO_SMALL = 1,
    /// The distorted image's size differs from the reference's.
    HC_SSIM2_SIZE_MISMATCH = 2,
    /// An allocation failed (or its size would overflow).
    HC_SSIM2_NO_MEMORY = 3,
    /// A null pointer, `channels` other than 3 or 4, or `stride` below width × channels.
    HC_SSIM2_INVALID_ARGUMENT = 4,
};

/// A reference image, prepared for scoring.
typedef struct hc_ssim2_reference hc_ssim2_reference;

/// Prepares `pixels` as the reference: 8-bit sRGB, interleaved, `channels` 3 (RGB) or 4 (RGBA,
/// straight alpha), rows `stride` bytes apart. With alpha (and any pixel not opaque), it is
/// prepared blended over two backgrounds, dark (0.1) and light (0.9), and a score is the worse
/// of the two, as libjxl's `ssimulacra2` tool does. On success `*out` holds the reference (free
/// it with `hc_ssim2_reference_free`); otherwise `*out` is NULL.
int hc_ssim2_reference_new(const uint8_t *pixels, size_t width, size_t height, size_t stride, int channels,
                           hc_ssim2_reference **out);

/// Scores `pixels` (same layout rules, same size as the reference) against the reference:
/// `*score` from 100 (identical) down, 90 visually lossless, 70 high quality, 50 medium, 30 low;
/// very distorted images go below 0. A distorted image with alpha is blended over the same
/// background as the reference (0.5 when the reference has none, as libjxl does).
int hc_ssim2_score(const hc_ssim2_reference *ref, const uint8_t *pixels, size_t width, size_t height, size_t stride,
                   int channels, double *score);

/// The bytes the reference holds (for accounting).
size_t hc_ssim2_reference_bytes(const hc_ssim2_reference *ref);

/// Frees a reference (NULL is allowed).
void hc_ssim2_reference_free(hc_ssim2_reference *ref);

#endif
