// Direct JPEG and PNG codecs for the pipeline's fast lane (HalcyonImage/DirectLane.swift),
// the PNG writer (DirectPNG.swift) and the bench's decode floor: libjpeg-turbo and libpng, the
// libraries ImageMagick itself uses, called without ImageMagick's 16-bit pixel cache in between.
// libjpeg and libpng report errors by longjmp, which Swift cannot catch; these wrappers turn them
// into return codes and a message. Below them, the pixel loops of the steps Halcyon runs on a
// frame's 16-bit samples (blur, sharpen, rounded corners, colour controls): each computes what
// ImageMagick computes, in its order of operations, so the samples come out the same.
#ifndef HALCYON_IMAGE_CODECS_H
#define HALCYON_IMAGE_CODECS_H

#include <stddef.h>
#include <stdint.h>

#define HC_ERROR_LENGTH 200

/// What a JPEG's headers say.
typedef struct {
    int width, height;
    /// 1 (grayscale), 3 (YCbCr/RGB) or 4 (CMYK/YCCK).
    int components;
    /// 1 when the decoder can give RGB without a colour conversion of its own: grey, YCbCr or
    /// RGB (not CMYK or YCCK).
    int rgb_decodable;
    /// 1 when an APP2 ICC_PROFILE marker is present.
    int has_icc;
    int progressive;
    /// Luma's sampling relative to chroma (2, 2 for 4:2:0; 1, 1 for 4:4:4); 0 for grey.
    int luma_h, luma_v;
} hc_jpeg_info;

/// Reads the headers (markers up to the first scan). 0 on success, else -1 and `error` set.
int hc_jpeg_read_info(const uint8_t *data, size_t size, hc_jpeg_info *info, char error[HC_ERROR_LENGTH]);

/// The decoded size at scale `num`/8 (1…8), as libjpeg computes it.
void hc_jpeg_scaled_size(int width, int height, int num, int *scaled_width, int *scaled_height);

/// Decodes a 1- or 3-component JPEG at scale `num`/8 into 8-bit RGB, rows of `stride` bytes
/// (at least 3 × the scaled width), `pixels` holding the scaled height's rows. 0 on success.
int hc_jpeg_decode_rgb(const uint8_t *data, size_t size, int num, uint8_t *pixels, size_t stride,
                       char error[HC_ERROR_LENGTH]);

/// libjpeg's quantization scale (percent of its standard tables) for a quality given in halves
/// (165 is 82.5): `jpeg_quality_scaling`'s curve, 5000/q below 50 and 200 − 2q from 50, at half
/// steps; a whole quality's scale is exactly libjpeg's. Clamped to qualities 1–100.
int hc_jpeg_scale(int quality_halves);

/// Encodes 8-bit RGB rows as a JPEG at a quality given in halves (`hc_jpeg_scale`; 2 × a whole
/// quality writes the file `jpeg_set_quality` would) with luma sampled `luma_h`×`luma_v` times
/// chroma (1–2 each), optimized Huffman tables, baseline or progressive. On success returns 0 and
/// `*out`/`*out_size` hold a buffer to release with `hc_free`.
int hc_jpeg_encode_rgb(const uint8_t *pixels, int width, int height, size_t stride, int quality_halves, int progressive,
                       int luma_h, int luma_v, uint8_t **out, size_t *out_size, char error[HC_ERROR_LENGTH]);

/// Decodes a PNG into 8-bit RGB (`channels` 3) or RGBA (4) with libpng's simplified API, rows of
/// `channels` × width bytes. 0 on success.
int hc_png_decode(const uint8_t *data, size_t size, int channels, uint8_t *pixels, int width, int height,
                  char error[HC_ERROR_LENGTH]);

enum {
    HC_PNG_MANY_COLORS = 1,   ///< more than 256 distinct colours (alpha counted)
    HC_PNG_GREY = 2,          ///< red = green = blue everywhere
    HC_PNG_PARTIAL_ALPHA = 4, ///< some alpha strictly between 0 and 255
    HC_PNG_TRANSPARENT = 8,   ///< some alpha 0
};

/// What ImageMagick's PNG writer looks at to choose a colour type, gathered band by band.
typedef struct {
    uint64_t seen[1024]; ///< distinct colours (alpha counted), up to 257
    int colors, partial, transparent, grey;
} hc_png_survey;

void hc_png_survey_start(hc_png_survey *survey);

/// Turns `count` pixels of 16-bit `samples` (ImageMagick's, map "RGB" or "RGBA": `channels` 3
/// or 4) into the 8-bit `pixels` ImageMagick's PNG writer would write — colours rounded, alpha
/// rounded up — and adds them to `survey`.
void hc_png_prepare(hc_png_survey *survey, const uint16_t *samples, uint8_t *pixels, size_t count, int channels);

/// The `HC_PNG_` flags that hold for every pixel prepared so far.
int hc_png_survey_flags(const hc_png_survey *survey);

/// Encodes 8-bit RGB (`channels` 3) or RGBA (4) rows of `channels` × width bytes as a PNG with
/// zlib level `level` (0–9) and libpng's adaptive filtering (every filter tried per row), the
/// settings ImageMagick's PNG writer uses for such images; with a png_struct of its own, so any
/// number run at once (ImageMagick's writer holds one process-wide lock). On success returns 0
/// and `*out`/`*out_size` hold a buffer to release with `hc_free`.
int hc_png_encode(const uint8_t *pixels, int width, int height, int channels, int level, uint8_t **out, size_t *out_size,
                  char error[HC_ERROR_LENGTH]);

/// Encodes 8-bit RGB (`channels` 3) or RGBA (4, straight alpha) rows of `stride` bytes as an
/// AVIF with libheif's AV1 encoder: `quality` 1–100 for colour and alpha, chroma 4:2:0 (or
/// 4:4:4 with `full_chroma`), aom's `speed` 0–9 (libheif's default is 6), `threads` worker threads (1 keeps
/// one encode on one core, as the pipeline's other codecs). On success returns 0 and
/// `*out`/`*out_size` hold a buffer to release with `hc_free`; -1 when this libheif has no AV1
/// encoder, another negative value for any other failure, with a message.
int hc_avif_encode(const uint8_t *pixels, int width, int height, size_t stride, int channels, int quality,
                   int full_chroma, int speed, int threads, uint8_t **out, size_t *out_size,
                   char error[HC_ERROR_LENGTH]);

/// Encodes 8-bit RGB (`channels` 3) or RGBA (4, straight alpha) rows of `stride` bytes as a
/// WebP with libwebp: `quality` 0–100 (lossless at 100), everything else libwebp's defaults, as
/// ImageMagick 6's writer does — the same bytes. On success returns 0 and `*out`/`*out_size`
/// hold a buffer to release with `hc_free`; -1 with a message otherwise.
int hc_webp_encode(const uint8_t *pixels, int width, int height, size_t stride, int channels, int quality, uint8_t **out,
                   size_t *out_size, char error[HC_ERROR_LENGTH]);

/// Decodes an AVIF (libheif) or a still WebP (libwebp) that must be `width`×`height` (checked
/// before any pixel is decoded) to packed 8-bit RGB, or RGBA (straight alpha) when the file has
/// alpha: `*channels` 3 or 4. On success returns 0 and `*out` holds a buffer to release with
/// `hc_free`; -1 with a message otherwise (-2: the WebP is an animation, for another decoder).
/// For scoring an output: ImageMagick 6 drops an AVIF's alpha.
int hc_avif_decode(const uint8_t *data, size_t size, int width, int height, uint8_t **out, int *channels,
                   char error[HC_ERROR_LENGTH]);
int hc_webp_decode(const uint8_t *data, size_t size, int width, int height, uint8_t **out, int *channels,
                   char error[HC_ERROR_LENGTH]);

/// libjxl's distance (0 lossless … 25) for a quality 1–100: `JxlEncoderDistanceFromQuality` of
/// libjxl 0.9 and later, cjxl's `-q` scale (90 → 1.0, "visually lossless").
float hc_jxl_distance(int quality);

/// Encodes packed 8-bit sRGB (`channels` 3) or RGBA (4, straight alpha) pixels as a JPEG XL
/// codestream with libjxl at `quality` (100: lossless) and `effort` 1–9, one thread. On success
/// returns 0 and `*out`/`*out_size` hold a buffer to release with `hc_free`; negative with a
/// message otherwise.
int hc_jxl_encode(const uint8_t *pixels, int width, int height, int channels, int quality, int effort, uint8_t **out,
                  size_t *out_size, char error[HC_ERROR_LENGTH]);

/// Recompresses a JPEG losslessly as a JPEG XL file that keeps the data to reconstruct the
/// original byte for byte (`djxl out.jxl out.jpg`). 0 on success (as `hc_jxl_encode`); -1 when
/// libjxl cannot take this JPEG (arithmetic coding, 12 bits, CMYK, some samplings and profiles);
/// -2 for any other failure.
int hc_jxl_transcode_jpeg(const uint8_t *jpeg, size_t size, int effort, uint8_t **out, size_t *out_size,
                          char error[HC_ERROR_LENGTH]);

/// Decodes a JPEG XL image that must be `width`×`height` (checked before any pixel is decoded)
/// to packed 8-bit sRGB, or RGBA when it has alpha (as `hc_avif_decode`).
int hc_jxl_decode(const uint8_t *data, size_t size, int width, int height, uint8_t **out, int *channels,
                  char error[HC_ERROR_LENGTH]);

void hc_free(void *pointer);

/// The direct lane's Lanczos resample of 8-bit RGB (3 channels) or RGBA (4, filtered
/// premultiplied) pixels: rows then columns with the weights `Resampler` computed — for output
/// column i, `h_count[i]` weights from `h_weights + i * h_stride` over source columns from
/// `h_start[i]`; for output row j likewise with the `v_` tables over source rows. Writes
/// `out_height` rows of `out_width` pixels at `target`. Returns 0, or -1 when memory could not
/// be had or the tables describe nothing.
int hc_resample_u8(const uint8_t *source, size_t source_stride, long source_height, int channels, const long *h_start,
                   const long *h_count, const float *h_weights, long h_stride, long out_width, const long *v_start,
                   const long *v_count, const float *v_weights, long v_stride, long out_height, uint8_t *target,
                   size_t target_stride);

/// `hc_resample_u8` of opaque 8-bit RGB (3 channels) in 16-bit fixed point, from the same float
/// tables: weights rounded to multiples of 2^-shift that sum to exactly 1, 8-bit rows between the
/// passes (clamped, as Pillow keeps them; columns first when that costs less), the multiply-adds
/// on AVX2 when the CPU has it and `simd` is nonzero, else portable loops that give the same
/// samples. Within a few levels of the float path's samples (above 50 dB PSNR on photographs),
/// about 2.4 times faster. Returns 0, or -1 when memory could not be had or the tables describe
/// nothing a 16-bit weight can hold.
int hc_resample_rgb8_fixed(const uint8_t *source, size_t source_stride, long source_height, const long *h_start,
                           const long *h_count, const float *h_weights, long h_stride, long out_width, const long *v_start,
                           const long *v_count, const float *v_weights, long v_stride, long out_height, uint8_t *target,
                           size_t target_stride, int simd);

/// RGBA pixels composited over white into RGB: c·a/255 + 255·(1 − a/255), rounded to nearest.
void hc_flatten_rgba_on_white(const uint8_t *rgba, uint8_t *rgb, size_t pixels);

/// Asked once a row by the long loops: nonzero stops them (the work is no longer wanted).
typedef int (*hc_stop_fn)(void *context);

/// ImageMagick 6's separable Gaussian on interleaved 16-bit samples (3 or 4 channels), in
/// place: rows then columns with `taps` weights (odd), edge pixels repeated, sums in double,
/// each pass rounded half up to 16 bits. With `weighted` (4 channels), colours are weighted
/// by alpha and alpha is summed plain. Returns 0, or -1 when memory could not be had.
/// `stop` (may be NULL) is asked before each row of each pass; when it answers nonzero the
/// function returns -2 with the pixels half done.
int hc_gaussian_u16(
    uint16_t *pixels, int width, int height, int channels, const double *kernel, int taps, int weighted, hc_stop_fn stop, void *stop_context);

/// ImageMagick 6's DstIn composite of a mask's alpha onto interleaved 16-bit RGBA samples, in
/// place: alpha becomes alpha × mask, colours stay (black where the result is transparent),
/// computed in double and rounded half up as the Q16 build does. The mask is `mask_width` ×
/// `mask_height` alpha samples; when smaller than the image its four quadrants are the image's
/// four corners and everything between them counts as opaque.
void hc_mask_alpha_u16(uint16_t *rgba, int width, int height, const uint16_t *mask, int mask_width, int mask_height);

/// ImageMagick 6's `-modulate` in HSL on the colours of `count` interleaved 16-bit pixels of
/// `channels` (3 or 4; alpha untouched), in place: each pixel to hue, saturation and lightness,
/// saturation and lightness scaled by their percentages (hue turned by `percent_hue` − 100 as
/// ImageMagick turns it), and back, in double, rounded half up as the Q16 build rounds.
void hc_modulate_hsl_u16(uint16_t *pixels, size_t count, int channels, double percent_lightness,
                         double percent_saturation, double percent_hue);

/// Replaces each colour sample (not alpha) of `count` interleaved pixels by `table[sample]`.
void hc_map_colors_u16(uint16_t *pixels, size_t count, int channels, const uint16_t *table);

#endif
