// AVIF output through libheif's API directly: ImageMagick 6's heic writer converts to YCbCr
// itself and hands libheif planes it can no longer filter, and reads its quality only from the
// wand. Here libheif takes RGB(A) and does the conversion and the chroma choice itself.
#include "image_codecs.h"

#include <libheif/heif.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint8_t *data;
    size_t size;
    size_t capacity;
    int failed;
} avif_sink;

static struct heif_error avif_write(struct heif_context *context, const void *data, size_t size, void *userdata) {
    (void)context;
    avif_sink *sink = userdata;
    struct heif_error ok = {heif_error_Ok, heif_suberror_Unspecified, "ok"};
    if (size > SIZE_MAX - sink->size) {
        sink->failed = 1;
        return ok;
    }
    if (sink->size + size > sink->capacity) {
        size_t capacity = sink->capacity ? sink->capacity : 65536;
        while (capacity < sink->size + size) capacity = capacity > SIZE_MAX / 2 ? sink->size + size : capacity * 2;
        uint8_t *grown = realloc(sink->data, capacity);
        if (!grown) {
            sink->failed = 1;
            return ok;
        }
        sink->data = grown;
        sink->capacity = capacity;
    }
    memcpy(sink->data + sink->size, data, size);
    sink->size += size;
    return ok;
}

static int avif_failed(struct heif_error e, const char *what, char error[HC_ERROR_LENGTH]) {
    if (e.code == heif_error_Ok) return 0;
    if (error) snprintf(error, HC_ERROR_LENGTH, "%s: %s", what, e.message ? e.message : "unknown libheif error");
    return 1;
}

int hc_avif_encode(const uint8_t *pixels, int width, int height, size_t stride, int channels, int quality,
                   int full_chroma, int speed, int threads, uint8_t **out, size_t *out_size,
                   char error[HC_ERROR_LENGTH]) {
    *out = NULL;
    *out_size = 0;
    if (!pixels || width < 1 || height < 1 || (channels != 3 && channels != 4) || stride < (size_t)width * channels ||
        quality < 1 || quality > 100 || speed < 0 || speed > 9 || threads < 1) {
        if (error) snprintf(error, HC_ERROR_LENGTH, "invalid arguments");
        return -2;
    }
    int status = -2;
    struct heif_context *context = heif_context_alloc();
    struct heif_encoder *encoder = NULL;
    struct heif_image *image = NULL;
    struct heif_image_handle *handle = NULL;
    avif_sink sink = {0};
    if (!context) {
        if (error) snprintf(error, HC_ERROR_LENGTH, "out of memory");
        return -2;
    }
    if (avif_failed(heif_context_get_encoder_for_format(context, heif_compression_AV1, &encoder), "no AV1 encoder", error)) {
        status = -1;
        goto done;
    }
    char count[16], pace[16];
    snprintf(count, sizeof count, "%d", threads);
    snprintf(pace, sizeof pace, "%d", speed);
    if (avif_failed(heif_encoder_set_lossy_quality(encoder, quality), "set the quality", error) ||
        avif_failed(heif_encoder_set_parameter(encoder, "chroma", full_chroma ? "444" : "420"), "set the chroma", error) ||
        avif_failed(heif_encoder_set_parameter(encoder, "speed", pace), "set the speed", error) ||
        avif_failed(heif_encoder_set_parameter(encoder, "threads", count), "set the threads", error))
        goto done;
    if (channels == 4) {
        char alpha[16];
        snprintf(alpha, sizeof alpha, "%d", quality);
        if (avif_failed(heif_encoder_set_parameter(encoder, "alpha-quality", alpha), "set the alpha quality", error)) goto done;
    }
    enum heif_chroma layout = channels == 4 ? heif_chroma_interleaved_RGBA : heif_chroma_interleaved_RGB;
    if (avif_failed(heif_image_create(width, height, heif_colorspace_RGB, layout, &image), "make the image", error) ||
        avif_failed(heif_image_add_plane(image, heif_channel_interleaved, width, height, 8), "add the plane", error))
        goto done;
    int plane_stride = 0;
    uint8_t *plane = heif_image_get_plane(image, heif_channel_interleaved, &plane_stride);
    if (!plane || plane_stride < width * channels) {
        if (error) snprintf(error, HC_ERROR_LENGTH, "no plane");
        goto done;
    }
    for (int y = 0; y < height; y++)
        memcpy(plane + (size_t)y * plane_stride, pixels + (size_t)y * stride, (size_t)width * channels);
    if (avif_failed(heif_context_encode_image(context, image, encoder, NULL, &handle), "encode", error)) goto done;
    struct heif_writer writer = {1, avif_write};
    if (avif_failed(heif_context_write(context, &writer, &sink), "write", error)) goto done;
    if (sink.failed) {
        if (error) snprintf(error, HC_ERROR_LENGTH, "out of memory for the output");
        goto done;
    }
    *out = sink.data;
    *out_size = sink.size;
    sink.data = NULL;
    status = 0;
done:
    free(sink.data);
    if (handle) heif_image_handle_release(handle);
    if (image) heif_image_release(image);
    if (encoder) heif_encoder_release(encoder);
    heif_context_free(context);
    return status;
}
