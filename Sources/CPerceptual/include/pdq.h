// PDQ, Meta's perceptual hash (256 bits and a quality, 0–100), reimplemented from its published
// description (facebook/ThreatExchange, pdq/): luminance, a two-pass box ("Jarosz") filter and a
// decimation to 64×64, the 16×16 corner of its DCT (frequencies 1–16 each way), each bit whether
// its coefficient is above the median; the quality counts the 64×64 image's strong gradients.
// The eight dihedral variants (rotations and mirrors) come from the one DCT by sign changes and
// a transpose. Any size is hashed whole, as the reference hashes it (its blur, computed only where
// the 64×64 grid samples it: one pass over the pixels, 64 rows of floats beside them). No global
// state; thread-safe.
#ifndef HALCYON_PDQ_H
#define HALCYON_PDQ_H

#include <stddef.h>
#include <stdint.h>

/// Return codes of `hc_pdq_hash`.
enum {
    HC_PDQ_OK = 0,
    /// Narrower or shorter than 5 pixels (the reference's smallest): no hash.
    HC_PDQ_TOO_SMALL = 1,
    /// An allocation failed (or its size would overflow).
    HC_PDQ_NO_MEMORY = 3,
    /// A null pointer, `channels` outside 1–4, `stride` below width × channels, or `transforms`
    /// outside 1–8.
    HC_PDQ_INVALID_ARGUMENT = 4,
};

/// The dihedral variants, in the order `hc_pdq_hash` writes them: the hash of the image turned
/// or mirrored so, computed from the original's pixels.
enum {
    HC_PDQ_ORIGINAL = 0,
    HC_PDQ_ROTATE_90 = 1,
    HC_PDQ_ROTATE_180 = 2,
    HC_PDQ_ROTATE_270 = 3,
    HC_PDQ_FLIP_X = 4,
    HC_PDQ_FLIP_Y = 5,
    HC_PDQ_FLIP_PLUS_1 = 6,
    HC_PDQ_FLIP_MINUS_1 = 7,
    HC_PDQ_TRANSFORMS = 8,
};

/// The bytes of one hash: the 64 hex digits of the reference's text form, two per byte, in order.
#define HC_PDQ_HASH_BYTES 32

/// Hashes 8-bit pixels (`channels` 1 grey, 2 grey + alpha, 3 RGB, 4 RGBA; alpha is ignored, as
/// the reference does), rows `stride` bytes apart. Writes the first `transforms` variants (1: the
/// original only; 8: all) into `hashes`, `transforms` × 32 bytes, and the quality (0–100; below
/// 50 the hash says little) into `*quality`.
int hc_pdq_hash(const uint8_t *pixels, size_t width, size_t height, size_t stride, int channels, int transforms,
                uint8_t *hashes, int *quality);

/// A hash fed a band of rows at a time (an image that is not in memory as 8-bit rows: only one
/// band of them need be), the same as `hc_pdq_hash` gives. `hc_pdq_begin` makes it for a
/// `width`×`height` image (HC_PDQ_TOO_SMALL, HC_PDQ_NO_MEMORY: none is made); `hc_pdq_rows`
/// adds the next `count` rows, top to bottom, as `hc_pdq_hash` takes pixels; once every row
/// has come, `hc_pdq_finish` writes the hashes and the quality. `hc_pdq_free` frees it
/// (nil is fine). One thread at a time.
typedef struct hc_pdq_state hc_pdq_state;
int hc_pdq_begin(size_t width, size_t height, hc_pdq_state **state);
int hc_pdq_rows(hc_pdq_state *state, const uint8_t *pixels, size_t stride, int channels, size_t count);
int hc_pdq_finish(hc_pdq_state *state, int transforms, uint8_t *hashes, int *quality);
void hc_pdq_free(hc_pdq_state *state);

#endif
