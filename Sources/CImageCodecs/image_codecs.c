#include "image_codecs.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <png.h>

// MARK: libjpeg errors

typedef struct {
    struct jpeg_error_mgr base;
    jmp_buf jump;
    char *message;
} hc_error_manager;

static void hc_error_exit(j_common_ptr cinfo) {
    hc_error_manager *e = (hc_error_manager *)cinfo->err;
    if (e->message) (*cinfo->err->format_message)(cinfo, e->message);
    longjmp(e->jump, 1);
}

// Warnings (corrupt data the decoder can recover from) are not errors, as in ImageMagick.
static void hc_emit_message(j_common_ptr cinfo, int level) { (void)cinfo; (void)level; }

static void hc_error_setup(hc_error_manager *e, char *message) {
    jpeg_std_error(&e->base);
    e->base.error_exit = hc_error_exit;
    e->base.emit_message = hc_emit_message;
    e->message = message;
    if (message) message[0] = 0;
}

// MARK: EXIF orientation

static unsigned read16(const uint8_t *p, int little) { return little ? p[0] | p[1] << 8 : p[0] << 8 | p[1]; }
static unsigned long read32(const uint8_t *p, int little) {
    return little ? (unsigned long)p[0] | (unsigned long)p[1] << 8 | (unsigned long)p[2] << 16 | (unsigned long)p[3] << 24
                  : (unsigned long)p[0] << 24 | (unsigned long)p[1] << 16 | (unsigned long)p[2] << 8 | (unsigned long)p[3];
}

/// Tag 0x0112 of IFD0 in an APP1 "Exif\0\0" payload; 0 when absent or malformed.
static int exif_orientation(const uint8_t *p, size_t n) {
    if (n < 14 || memcmp(p, "Exif\0\0", 6) != 0) return 0;
    const uint8_t *t = p + 6;
    size_t tn = n - 6;
    int little;
    if (t[0] == 'I' && t[1] == 'I') little = 1;
    else if (t[0] == 'M' && t[1] == 'M') little = 0;
    else return 0;
    unsigned long ifd = read32(t + 4, little);
    if (ifd + 2 > tn) return 0;
    unsigned count = read16(t + ifd, little);
    for (unsigned i = 0; i < count; i++) {
        size_t entry = ifd + 2 + (size_t)i * 12;
        if (entry + 12 > tn) return 0;
        if (read16(t + entry, little) == 0x0112) {
            unsigned value = read16(t + entry + 8, little);
            return value >= 1 && value <= 8 ? (int)value : 0;
        }
    }
    return 0;
}

// MARK: JPEG

/// Reads the headers into `info` (when not NULL) and, when `pixels` is not NULL, decodes at
/// scale `num`/8 into RGB rows of `stride` bytes.
static int jpeg_read(const uint8_t *data, size_t size, hc_jpeg_info *info, int num, uint8_t *pixels, size_t stride,
                     char error[HC_ERROR_LENGTH]) {
    struct jpeg_decompress_struct cinfo;
    hc_error_manager e;
    hc_error_setup(&e, error);
    cinfo.err = &e.base;
    if (setjmp(e.jump)) {
        jpeg_destroy_decompress(&cinfo);
        return -1;
    }
    jpeg_create_decompress(&cinfo);
    if (info) {
        jpeg_save_markers(&cinfo, JPEG_APP0 + 1, 0xffff);
        jpeg_save_markers(&cinfo, JPEG_APP0 + 2, 0xffff);
    }
    jpeg_mem_src(&cinfo, data, (unsigned long)size);
    jpeg_read_header(&cinfo, TRUE);
    if (info) {
        memset(info, 0, sizeof *info);
        info->width = (int)cinfo.image_width;
        info->height = (int)cinfo.image_height;
        info->components = cinfo.num_components;
        info->rgb_decodable = (cinfo.num_components == 1 && cinfo.jpeg_color_space == JCS_GRAYSCALE) ||
                              (cinfo.num_components == 3 && (cinfo.jpeg_color_space == JCS_YCbCr || cinfo.jpeg_color_space == JCS_RGB));
        info->progressive = cinfo.progressive_mode ? 1 : 0;
        if (cinfo.num_components == 3 && cinfo.comp_info[1].h_samp_factor > 0 && cinfo.comp_info[1].v_samp_factor > 0) {
            info->luma_h = cinfo.comp_info[0].h_samp_factor / cinfo.comp_info[1].h_samp_factor;
            info->luma_v = cinfo.comp_info[0].v_samp_factor / cinfo.comp_info[1].v_samp_factor;
        }
        for (jpeg_saved_marker_ptr m = cinfo.marker_list; m; m = m->next) {
            if (m->marker == JPEG_APP0 + 1 && !info->orientation) info->orientation = exif_orientation(m->data, m->data_length);
            if (m->marker == JPEG_APP0 + 2 && m->data_length >= 12 && memcmp(m->data, "ICC_PROFILE", 12) == 0) info->has_icc = 1;
        }
    }
    if (pixels) {
        if (cinfo.num_components != 1 && cinfo.num_components != 3) {
            if (error) snprintf(error, HC_ERROR_LENGTH, "%d colour components", cinfo.num_components);
            jpeg_destroy_decompress(&cinfo);
            return -1;
        }
        cinfo.scale_num = (unsigned)num;
        cinfo.scale_denom = 8;
        cinfo.out_color_space = JCS_RGB;
        jpeg_start_decompress(&cinfo);
        while (cinfo.output_scanline < cinfo.output_height) {
            JSAMPROW rows[8];
            int n = 0;
            for (; n < 8 && cinfo.output_scanline + (JDIMENSION)n < cinfo.output_height; n++)
                rows[n] = pixels + (size_t)(cinfo.output_scanline + (JDIMENSION)n) * stride;
            jpeg_read_scanlines(&cinfo, rows, (JDIMENSION)n);
        }
        jpeg_finish_decompress(&cinfo);
    }
    jpeg_destroy_decompress(&cinfo);
    return 0;
}

int hc_jpeg_read_info(const uint8_t *data, size_t size, hc_jpeg_info *info, char error[HC_ERROR_LENGTH]) {
    return jpeg_read(data, size, info, 8, NULL, 0, error);
}

void hc_jpeg_scaled_size(int width, int height, int num, int *scaled_width, int *scaled_height) {
    // jdiv_round_up(dimension × num, 8), as jpeg_calc_output_dimensions does.
    *scaled_width = (int)(((long)width * num + 7) / 8);
    *scaled_height = (int)(((long)height * num + 7) / 8);
}

int hc_jpeg_decode_rgb(const uint8_t *data, size_t size, int num, uint8_t *pixels, size_t stride,
                       char error[HC_ERROR_LENGTH]) {
    return jpeg_read(data, size, NULL, num, pixels, stride, error);
}

int hc_jpeg_encode_rgb(const uint8_t *pixels, int width, int height, size_t stride, int quality, int progressive,
                       int luma_h, int luma_v, uint8_t **out, size_t *out_size, char error[HC_ERROR_LENGTH]) {
    struct jpeg_compress_struct cinfo;
    hc_error_manager e;
    unsigned char *buffer = NULL;
    unsigned long length = 0;
    hc_error_setup(&e, error);
    cinfo.err = &e.base;
    if (setjmp(e.jump)) {
        jpeg_destroy_compress(&cinfo);
        free(buffer);
        return -1;
    }
    jpeg_create_compress(&cinfo);
    jpeg_mem_dest(&cinfo, &buffer, &length);
    cinfo.image_width = (JDIMENSION)width;
    cinfo.image_height = (JDIMENSION)height;
    cinfo.input_components = 3;
    cinfo.in_color_space = JCS_RGB;
    jpeg_set_defaults(&cinfo);
    jpeg_set_quality(&cinfo, quality, TRUE);
    cinfo.comp_info[0].h_samp_factor = luma_h == 1 ? 1 : 2;
    cinfo.comp_info[0].v_samp_factor = luma_v == 1 ? 1 : 2;
    cinfo.optimize_coding = TRUE;
    if (progressive) jpeg_simple_progression(&cinfo);
    jpeg_start_compress(&cinfo, TRUE);
    while (cinfo.next_scanline < cinfo.image_height) {
        JSAMPROW row = (JSAMPROW)(pixels + (size_t)cinfo.next_scanline * stride);
        jpeg_write_scanlines(&cinfo, &row, 1);
    }
    jpeg_finish_compress(&cinfo);
    jpeg_destroy_compress(&cinfo);
    *out = buffer;
    *out_size = length;
    return 0;
}

// MARK: PNG

int hc_png_decode(const uint8_t *data, size_t size, int channels, uint8_t *pixels, int width, int height,
                  char error[HC_ERROR_LENGTH]) {
    png_image image;
    memset(&image, 0, sizeof image);
    image.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_memory(&image, data, size)) goto failed;
    if ((int)image.width != width || (int)image.height != height) {
        if (error) snprintf(error, HC_ERROR_LENGTH, "header says %ux%u, expected %dx%d", image.width, image.height, width, height);
        png_image_free(&image);
        return -1;
    }
    image.format = channels == 4 ? PNG_FORMAT_RGBA : PNG_FORMAT_RGB;
    if (!png_image_finish_read(&image, NULL, pixels, (png_int_32)(width * channels), NULL)) goto failed;
    return 0;
failed:
    if (error) snprintf(error, HC_ERROR_LENGTH, "%s", image.message);
    png_image_free(&image);
    return -1;
}

void hc_free(void *pointer) { free(pointer); }

// MARK: Gaussian (the loops of HalcyonImage's SeparableGaussian; C so that a debug build of
// the worker still blurs at an optimised speed: this target is compiled with -O2)

static inline void gaussian_load(const uint16_t *pixel, double *out, int channels, int weighted) {
    if (!weighted) {
        for (int c = 0; c < channels; c++) out[c] = (double)pixel[c];
    } else {
        double a = (double)pixel[3] / 65535;
        for (int c = 0; c < 3; c++) out[c] = (double)pixel[c] * a;
        out[3] = a;
    }
}

static void gaussian_store(double *sums, uint16_t *row, size_t count, int weighted) {
    if (weighted) {
        for (size_t i = 0; i < count; i += 4) {
            double a = sums[i + 3];
            double gamma = a > 1e-12 ? 1 / a : 0;
            for (int c = 0; c < 3; c++) sums[i + c] *= gamma;
            sums[i + 3] = a * 65535;
        }
    }
    for (size_t i = 0; i < count; i++) {
        double v = sums[i] + 0.5;
        row[i] = (uint16_t)(v < 0 ? 0 : v > 65535 ? 65535 : v);
    }
}

int hc_gaussian_u16(uint16_t *pixels, int width, int height, int channels, const double *kernel, int taps, int weighted) {
    int reach = (taps - 1) / 2;
    size_t row_length = (size_t)width * (size_t)channels;
    size_t ring_rows = (size_t)(2 * reach + 1);
    double *padded = malloc(((size_t)width + 2 * (size_t)reach) * (size_t)channels * sizeof(double));
    double *sums = malloc((row_length ? row_length : 1) * sizeof(double));
    double *ring = malloc(ring_rows * (row_length ? row_length : 1) * sizeof(double));
    if (!padded || !sums || !ring) {
        free(padded);
        free(sums);
        free(ring);
        return -1;
    }
    // Rows: each widened by `reach` repeated edge pixels on both sides.
    for (int y = 0; y < height; y++) {
        uint16_t *row = pixels + (size_t)y * row_length;
        for (int x = -reach; x < width + reach; x++) {
            int sx = x < 0 ? 0 : x > width - 1 ? width - 1 : x;
            gaussian_load(row + (size_t)sx * channels, padded + (size_t)(x + reach) * channels, channels, weighted);
        }
        memset(sums, 0, row_length * sizeof(double));
        for (int t = 0; t < taps; t++) {
            double k = kernel[t];
            const double *tap = padded + (size_t)t * channels;
            for (size_t i = 0; i < row_length; i++) sums[i] += k * tap[i];
        }
        gaussian_store(sums, row, row_length, weighted);
    }
    // Columns: rows converted once into a ring of 2 × reach + 1, before the output overwrites them.
    int converted = -1;
    for (int y = 0; y < height; y++) {
        int last = y + reach < height - 1 ? y + reach : height - 1;
        while (converted < last) {
            converted++;
            const uint16_t *from = pixels + (size_t)converted * row_length;
            double *to = ring + ((size_t)converted % ring_rows) * row_length;
            for (int x = 0; x < width; x++) gaussian_load(from + (size_t)x * channels, to + (size_t)x * channels, channels, weighted);
        }
        memset(sums, 0, row_length * sizeof(double));
        for (int t = 0; t < taps; t++) {
            int sy = y - reach + t;
            sy = sy < 0 ? 0 : sy > height - 1 ? height - 1 : sy;
            double k = kernel[t];
            const double *source = ring + ((size_t)sy % ring_rows) * row_length;
            for (size_t i = 0; i < row_length; i++) sums[i] += k * source[i];
        }
        gaussian_store(sums, pixels + (size_t)y * row_length, row_length, weighted);
    }
    free(padded);
    free(sums);
    free(ring);
    return 0;
}
