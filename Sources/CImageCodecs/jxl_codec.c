// JPEG XL through libjxl directly (ImageMagick 6 has no coder for it): encoding 8-bit sRGB
// pixels at a quality (libjxl's later distance-from-quality mapping), lossless recompression
// of a JPEG (the original reconstructable byte for byte), and decoding an output to score it.
// One thread per encode (no parallel runner), as the pipeline's other codecs.
#include "image_codecs.h"

#include <jxl/decode.h>
#include <jxl/encode.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

float hc_jxl_distance(int quality) {
    // JxlEncoderDistanceFromQuality of libjxl 0.9+ (0.7 has none): cjxl's -q scale.
    float q = (float)quality;
    if (q >= 100) return 0.0f;
    if (q >= 30) return 0.1f + (100 - q) * 0.09f;
    return 53.0f / 3000.0f * q * q - 23.0f / 20.0f * q + 25.0f;
}

/// Runs the encoder to the end into a buffer that grows as needed.
static int drain(JxlEncoder *encoder, uint8_t **out, size_t *out_size, char error[HC_ERROR_LENGTH]) {
    size_t capacity = 64 * 1024, used = 0;
    uint8_t *buffer = malloc(capacity);
    if (!buffer) {
        snprintf(error, HC_ERROR_LENGTH, "out of memory");
        return -2;
    }
    for (;;) {
        uint8_t *next = buffer + used;
        size_t available = capacity - used;
        JxlEncoderStatus status = JxlEncoderProcessOutput(encoder, &next, &available);
        used = (size_t)(next - buffer);
        if (status == JXL_ENC_SUCCESS) break;
        if (status != JXL_ENC_NEED_MORE_OUTPUT) {
            free(buffer);
            snprintf(error, HC_ERROR_LENGTH, "libjxl could not encode (error %d)", (int)JxlEncoderGetError(encoder));
            return -2;
        }
        size_t grown = capacity * 2;
        uint8_t *bigger = realloc(buffer, grown);
        if (!bigger) {
            free(buffer);
            snprintf(error, HC_ERROR_LENGTH, "out of memory");
            return -2;
        }
        buffer = bigger;
        capacity = grown;
    }
    *out = buffer;
    *out_size = used;
    return 0;
}

int hc_jxl_encode(const uint8_t *pixels, int width, int height, int channels, int quality, int effort, uint8_t **out,
                  size_t *out_size, char error[HC_ERROR_LENGTH]) {
    error[0] = 0;
    if (width <= 0 || height <= 0 || (channels != 3 && channels != 4) || quality < 1 || quality > 100 || effort < 1 ||
        effort > 9) {
        snprintf(error, HC_ERROR_LENGTH, "bad arguments");
        return -2;
    }
    JxlEncoder *encoder = JxlEncoderCreate(NULL);
    if (!encoder) {
        snprintf(error, HC_ERROR_LENGTH, "out of memory");
        return -2;
    }
    int lossless = quality >= 100;
    JxlBasicInfo info;
    JxlEncoderInitBasicInfo(&info);
    info.xsize = (uint32_t)width;
    info.ysize = (uint32_t)height;
    info.bits_per_sample = 8;
    info.num_color_channels = 3;
    info.alpha_bits = channels == 4 ? 8 : 0;
    info.num_extra_channels = channels == 4 ? 1 : 0;
    // Lossless keeps the samples as they are; lossy encodes in XYB, converted back to sRGB.
    info.uses_original_profile = lossless ? JXL_TRUE : JXL_FALSE;
    JxlColorEncoding color;
    JxlColorEncodingSetToSRGB(&color, JXL_FALSE);
    JxlPixelFormat format = {(uint32_t)channels, JXL_TYPE_UINT8, JXL_NATIVE_ENDIAN, 0};
    JxlEncoderFrameSettings *settings = NULL;
    const char *failed = NULL;
    if (JxlEncoderSetBasicInfo(encoder, &info) != JXL_ENC_SUCCESS)
        failed = "basic info";
    else if (JxlEncoderSetColorEncoding(encoder, &color) != JXL_ENC_SUCCESS)
        failed = "colour encoding";
    else if (!(settings = JxlEncoderFrameSettingsCreate(encoder, NULL)))
        failed = "frame settings";
    else if (JxlEncoderFrameSettingsSetOption(settings, JXL_ENC_FRAME_SETTING_EFFORT, effort) != JXL_ENC_SUCCESS)
        failed = "effort";
    else if (lossless ? JxlEncoderSetFrameLossless(settings, JXL_TRUE) != JXL_ENC_SUCCESS
                      : JxlEncoderSetFrameDistance(settings, hc_jxl_distance(quality)) != JXL_ENC_SUCCESS)
        failed = "distance";
    else if (JxlEncoderAddImageFrame(settings, &format, pixels, (size_t)width * height * channels) != JXL_ENC_SUCCESS)
        failed = "frame";
    if (failed) {
        snprintf(error, HC_ERROR_LENGTH, "libjxl refused the %s (error %d)", failed, (int)JxlEncoderGetError(encoder));
        JxlEncoderDestroy(encoder);
        return -2;
    }
    JxlEncoderCloseInput(encoder);
    int status = drain(encoder, out, out_size, error);
    JxlEncoderDestroy(encoder);
    return status;
}

int hc_jxl_transcode_jpeg(const uint8_t *jpeg, size_t size, int effort, uint8_t **out, size_t *out_size,
                          char error[HC_ERROR_LENGTH]) {
    error[0] = 0;
    JxlEncoder *encoder = JxlEncoderCreate(NULL);
    if (!encoder) {
        snprintf(error, HC_ERROR_LENGTH, "out of memory");
        return -2;
    }
    JxlEncoderFrameSettings *settings = NULL;
    const char *failed = NULL;
    if (JxlEncoderStoreJPEGMetadata(encoder, JXL_TRUE) != JXL_ENC_SUCCESS)
        failed = "reconstruction data";
    else if (!(settings = JxlEncoderFrameSettingsCreate(encoder, NULL)))
        failed = "frame settings";
    else if (JxlEncoderFrameSettingsSetOption(settings, JXL_ENC_FRAME_SETTING_EFFORT, effort) != JXL_ENC_SUCCESS)
        failed = "effort";
    if (failed) {
        snprintf(error, HC_ERROR_LENGTH, "libjxl refused the %s (error %d)", failed, (int)JxlEncoderGetError(encoder));
        JxlEncoderDestroy(encoder);
        return -2;
    }
    // Only here does libjxl judge the JPEG itself: arithmetic coding, 12 bits, CMYK or YCCK,
    // some samplings and profiles it cannot keep reconstructable.
    if (JxlEncoderAddJPEGFrame(settings, jpeg, size) != JXL_ENC_SUCCESS) {
        snprintf(error, HC_ERROR_LENGTH, "libjxl cannot recompress this JPEG reconstructably (error %d)",
                 (int)JxlEncoderGetError(encoder));
        JxlEncoderDestroy(encoder);
        return -1;
    }
    JxlEncoderCloseInput(encoder);
    int status = drain(encoder, out, out_size, error);
    JxlEncoderDestroy(encoder);
    return status;
}

int hc_jxl_decode(const uint8_t *data, size_t size, int width, int height, uint8_t **out, int *channels,
                  char error[HC_ERROR_LENGTH]) {
    error[0] = 0;
    *out = NULL;
    JxlDecoder *decoder = JxlDecoderCreate(NULL);
    if (!decoder) {
        snprintf(error, HC_ERROR_LENGTH, "out of memory");
        return -1;
    }
    uint8_t *pixels = NULL;
    int result = -1, count = 3;
    JxlPixelFormat format = {3, JXL_TYPE_UINT8, JXL_NATIVE_ENDIAN, 0};
    if (JxlDecoderSubscribeEvents(decoder, JXL_DEC_BASIC_INFO | JXL_DEC_FULL_IMAGE) != JXL_DEC_SUCCESS ||
        JxlDecoderSetInput(decoder, data, size) != JXL_DEC_SUCCESS) {
        snprintf(error, HC_ERROR_LENGTH, "libjxl decoder setup failed");
        goto done;
    }
    JxlDecoderCloseInput(decoder);
    for (;;) {
        JxlDecoderStatus status = JxlDecoderProcessInput(decoder);
        if (status == JXL_DEC_BASIC_INFO) {
            JxlBasicInfo info;
            if (JxlDecoderGetBasicInfo(decoder, &info) != JXL_DEC_SUCCESS) {
                snprintf(error, HC_ERROR_LENGTH, "no basic info");
                goto done;
            }
            // Checked before any pixel is decoded: only an output of the expected size is.
            if ((int)info.xsize != width || (int)info.ysize != height) {
                snprintf(error, HC_ERROR_LENGTH, "%ux%u, expected %dx%d", info.xsize, info.ysize, width, height);
                goto done;
            }
            count = info.alpha_bits > 0 ? 4 : 3;
            format.num_channels = (uint32_t)count;
        } else if (status == JXL_DEC_NEED_IMAGE_OUT_BUFFER) {
            size_t needed = 0;
            if (pixels) {
                snprintf(error, HC_ERROR_LENGTH, "more than one frame");
                goto done;
            }
            if (JxlDecoderImageOutBufferSize(decoder, &format, &needed) != JXL_DEC_SUCCESS ||
                needed != (size_t)width * height * count || !(pixels = malloc(needed)) ||
                JxlDecoderSetImageOutBuffer(decoder, &format, pixels, needed) != JXL_DEC_SUCCESS) {
                snprintf(error, HC_ERROR_LENGTH, "no output buffer");
                goto done;
            }
        } else if (status == JXL_DEC_FULL_IMAGE) {
            continue;
        } else if (status == JXL_DEC_SUCCESS) {
            if (!pixels) {
                snprintf(error, HC_ERROR_LENGTH, "no image");
                goto done;
            }
            break;
        } else {
            snprintf(error, HC_ERROR_LENGTH, status == JXL_DEC_NEED_MORE_INPUT ? "truncated" : "corrupt (libjxl error)");
            goto done;
        }
    }
    *out = pixels;
    *channels = count;
    pixels = NULL;
    result = 0;
done:
    free(pixels);
    JxlDecoderDestroy(decoder);
    return result;
}
