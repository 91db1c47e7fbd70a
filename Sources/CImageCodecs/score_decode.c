// Decoders for scoring an output against its pixels, through each codec's own library:
// ImageMagick 6's heic reader drops the alpha an AVIF keeps (every transparent AVIF scored 0),
// so the perceptual score reads AVIF with libheif and WebP with libwebp, alpha and all.
#include "image_codecs.h"

#include <libheif/heif.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <webp/decode.h>

/// A plane's rows copied into a packed buffer; NULL when out of memory.
static uint8_t *packed_copy(const uint8_t *plane, int stride, int width, int height, int channels) {
    size_t row = (size_t)width * channels;
    uint8_t *out = malloc(row * (size_t)height);
    if (!out) return NULL;
    for (int y = 0; y < height; y++) memcpy(out + row * y, plane + (size_t)stride * y, row);
    return out;
}

int hc_avif_decode(const uint8_t *data, size_t size, int width, int height, uint8_t **out, int *channels,
                   char error[HC_ERROR_LENGTH]) {
    *out = NULL;
    *channels = 0;
    if (!data || size == 0 || width < 1 || height < 1) {
        if (error) snprintf(error, HC_ERROR_LENGTH, "invalid arguments");
        return -1;
    }
    int status = -1;
    struct heif_context *context = heif_context_alloc();
    struct heif_image_handle *handle = NULL;
    struct heif_image *image = NULL;
    if (!context) {
        if (error) snprintf(error, HC_ERROR_LENGTH, "out of memory");
        return -1;
    }
    struct heif_error e = heif_context_read_from_memory_without_copy(context, data, size, NULL);
    if (e.code == heif_error_Ok) e = heif_context_get_primary_image_handle(context, &handle);
    if (e.code != heif_error_Ok) {
        if (error) snprintf(error, HC_ERROR_LENGTH, "read: %s", e.message ? e.message : "unknown libheif error");
        goto done;
    }
    // The size is checked before any pixel is decoded: only an image of the expected size is read.
    if (heif_image_handle_get_width(handle) != width || heif_image_handle_get_height(handle) != height) {
        if (error)
            snprintf(error, HC_ERROR_LENGTH, "%dx%d, not the expected %dx%d", heif_image_handle_get_width(handle),
                     heif_image_handle_get_height(handle), width, height);
        goto done;
    }
    int alpha = heif_image_handle_has_alpha_channel(handle) ? 1 : 0;
    enum heif_chroma layout = alpha ? heif_chroma_interleaved_RGBA : heif_chroma_interleaved_RGB;
    e = heif_decode_image(handle, &image, heif_colorspace_RGB, layout, NULL);
    if (e.code != heif_error_Ok) {
        if (error) snprintf(error, HC_ERROR_LENGTH, "decode: %s", e.message ? e.message : "unknown libheif error");
        goto done;
    }
    int stride = 0;
    const uint8_t *plane = heif_image_get_plane_readonly(image, heif_channel_interleaved, &stride);
    int n = alpha ? 4 : 3;
    if (!plane || stride < width * n || heif_image_get_width(image, heif_channel_interleaved) != width ||
        heif_image_get_height(image, heif_channel_interleaved) != height) {
        if (error) snprintf(error, HC_ERROR_LENGTH, "decode: no plane of the expected size");
        goto done;
    }
    *out = packed_copy(plane, stride, width, height, n);
    if (!*out) {
        if (error) snprintf(error, HC_ERROR_LENGTH, "out of memory");
        goto done;
    }
    *channels = n;
    status = 0;
done:
    if (image) heif_image_release(image);
    if (handle) heif_image_handle_release(handle);
    heif_context_free(context);
    return status;
}

int hc_webp_decode(const uint8_t *data, size_t size, int width, int height, uint8_t **out, int *channels,
                   char error[HC_ERROR_LENGTH]) {
    *out = NULL;
    *channels = 0;
    WebPBitstreamFeatures features;
    if (!data || size == 0 || width < 1 || height < 1 || WebPGetFeatures(data, size, &features) != VP8_STATUS_OK) {
        if (error) snprintf(error, HC_ERROR_LENGTH, "not a WebP");
        return -1;
    }
    if (features.has_animation) {
        if (error) snprintf(error, HC_ERROR_LENGTH, "an animation");
        return -2;
    }
    if (features.width != width || features.height != height) {
        if (error)
            snprintf(error, HC_ERROR_LENGTH, "%dx%d, not the expected %dx%d", features.width, features.height, width, height);
        return -1;
    }
    int n = features.has_alpha ? 4 : 3;
    size_t row = (size_t)width * n;
    uint8_t *pixels = malloc(row * (size_t)height);
    if (!pixels) {
        if (error) snprintf(error, HC_ERROR_LENGTH, "out of memory");
        return -1;
    }
    uint8_t *done = n == 4 ? WebPDecodeRGBAInto(data, size, pixels, row * (size_t)height, (int)row)
                           : WebPDecodeRGBInto(data, size, pixels, row * (size_t)height, (int)row);
    if (!done) {
        free(pixels);
        if (error) snprintf(error, HC_ERROR_LENGTH, "decode failed");
        return -1;
    }
    *out = pixels;
    *channels = n;
    return 0;
}
