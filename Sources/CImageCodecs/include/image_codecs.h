// Direct JPEG and PNG codecs for the pipeline's fast lane (HalcyonImage/DirectCodecs.swift) and
// the bench's decode floor: libjpeg-turbo and libpng, the libraries ImageMagick itself decodes
// with, called without ImageMagick's 16-bit pixel cache in between. libjpeg reports errors by
// longjmp, which Swift cannot catch; these wrappers turn them into return codes and a message.
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
    /// EXIF orientation 1–8, 0 when absent.
    int orientation;
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

/// Encodes 8-bit RGB rows as a JPEG with luma sampled `luma_h`×`luma_v` times chroma (1–2 each),
/// optimized Huffman tables, baseline or progressive. On success returns 0 and `*out`/`*out_size`
/// hold a buffer to release with `hc_free`.
int hc_jpeg_encode_rgb(const uint8_t *pixels, int width, int height, size_t stride, int quality, int progressive,
                       int luma_h, int luma_v, uint8_t **out, size_t *out_size, char error[HC_ERROR_LENGTH]);

/// Decodes a PNG into 8-bit RGB (`channels` 3) or RGBA (4) with libpng's simplified API, rows of
/// `channels` × width bytes. 0 on success.
int hc_png_decode(const uint8_t *data, size_t size, int channels, uint8_t *pixels, int width, int height,
                  char error[HC_ERROR_LENGTH]);

void hc_free(void *pointer);

/// ImageMagick 6's separable Gaussian on interleaved 16-bit samples (3 or 4 channels), in
/// place: rows then columns with `taps` weights (odd), edge pixels repeated, sums in double,
/// each pass rounded half up to 16 bits. With `weighted` (4 channels), colours are weighted
/// by alpha and alpha is summed plain. Returns 0, or -1 when memory could not be had.
int hc_gaussian_u16(uint16_t *pixels, int width, int height, int channels, const double *kernel, int taps, int weighted);

#endif
