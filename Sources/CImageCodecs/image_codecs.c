#include "image_codecs.h"

// The pixel loops below reproduce ImageMagick's arithmetic operation for operation: no fused
// multiply-adds, which would round differently.
#pragma STDC FP_CONTRACT OFF

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
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

int hc_jpeg_scale(int quality_halves) {
    // jpeg_quality_scaling's curve at half steps: 5000/q below 50, 200 − 2q from 50 (integer, as
    // libjpeg's own: a whole quality's scale is exactly jpeg_quality_scaling's).
    int q2 = quality_halves < 2 ? 2 : quality_halves > 200 ? 200 : quality_halves;
    return q2 < 100 ? 10000 / q2 : 200 - q2;
}

int hc_jpeg_encode_rgb(const uint8_t *pixels, int width, int height, size_t stride, int quality_halves, int progressive,
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
    jpeg_set_linear_quality(&cinfo, hc_jpeg_scale(quality_halves), TRUE);
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

typedef struct {
    uint8_t *data;
    size_t size, capacity;
    char *error;
} png_sink;

void hc_png_survey_start(hc_png_survey *survey) { memset(survey, 0, sizeof *survey); survey->grey = 1; }

void hc_png_prepare(hc_png_survey *survey, const uint16_t *samples, uint8_t *pixels, size_t count, int channels) {
    for (size_t i = 0; i < count; i++) {
        const uint16_t *q = samples + i * (size_t)channels;
        uint8_t *p = pixels + i * (size_t)channels;
        // Colours as ImageMagick scales a quantum to 8 bits (rounded); alpha as its PNG writer
        // does (255 − its 8-bit opacity, truncated): ⌈A · 255 / 65535⌉.
        for (int c = 0; c < 3; c++) p[c] = (uint8_t)(((q[c] + 128u) - ((q[c] + 128u) >> 8)) >> 8);
        if (channels == 4) p[3] = (uint8_t)(((uint32_t)q[3] * 255u + 65534u) / 65535u);
        uint8_t a = channels == 4 ? p[3] : 255;
        if (a == 0) survey->transparent = 1;
        else if (a != 255) survey->partial = 1;
        if (p[0] != p[1] || p[1] != p[2]) survey->grey = 0;
        if (survey->colors <= 256) {
            // Open addressing; 0 marks an empty slot, so colours are stored + 1.
            uint64_t key = ((uint64_t)p[0] << 24 | (uint64_t)p[1] << 16 | (uint64_t)p[2] << 8 | a) + 1;
            size_t slot = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 54);
            while (survey->seen[slot] && survey->seen[slot] != key) slot = (slot + 1) & 1023;
            if (!survey->seen[slot]) {
                survey->seen[slot] = key;
                survey->colors++;
            }
        }
    }
}

int hc_png_survey_flags(const hc_png_survey *survey) {
    return (survey->colors > 256 ? HC_PNG_MANY_COLORS : 0) | (survey->grey ? HC_PNG_GREY : 0) |
           (survey->partial ? HC_PNG_PARTIAL_ALPHA : 0) | (survey->transparent ? HC_PNG_TRANSPARENT : 0);
}

static void png_sink_write(png_structp png, png_bytep bytes, size_t length) {
    png_sink *sink = png_get_io_ptr(png);
    if (sink->size + length > sink->capacity) {
        size_t capacity = sink->capacity ? sink->capacity : 65536;
        while (capacity < sink->size + length) capacity *= 2;
        uint8_t *grown = realloc(sink->data, capacity);
        if (!grown) png_error(png, "out of memory for the encoded PNG");
        sink->data = grown;
        sink->capacity = capacity;
    }
    memcpy(sink->data + sink->size, bytes, length);
    sink->size += length;
}

static void png_sink_flush(png_structp png) { (void)png; }

static void png_encode_error(png_structp png, png_const_charp message) {
    png_sink *sink = png_get_io_ptr(png);
    if (sink && sink->error) snprintf(sink->error, HC_ERROR_LENGTH, "%s", message);
    png_longjmp(png, 1);
}

static void png_encode_warning(png_structp png, png_const_charp message) { (void)png; (void)message; }

int hc_png_encode(const uint8_t *pixels, int width, int height, int channels, int level, uint8_t **out, size_t *out_size,
                  char error[HC_ERROR_LENGTH]) {
    png_sink sink = {NULL, 0, 0, error};
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, png_encode_error, png_encode_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!png || !info) {
        if (error) snprintf(error, HC_ERROR_LENGTH, "libpng could not start");
        png_destroy_write_struct(&png, &info);
        return -1;
    }
    // Set before anything can fail: the error handler reads the sink for its message.
    png_set_write_fn(png, &sink, png_sink_write, png_sink_flush);
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        free(sink.data);
        return -1;
    }
    png_set_IHDR(png, info, (png_uint_32)width, (png_uint_32)height, 8, channels == 4 ? PNG_COLOR_TYPE_RGBA : PNG_COLOR_TYPE_RGB,
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_BASE, PNG_FILTER_TYPE_BASE);
    // ImageMagick's settings for RGB(A): with the same libpng and zlib, the same bytes.
    png_set_compression_buffer_size(png, 32768);
    png_set_compression_mem_level(png, 9);
    png_set_compression_level(png, level);
    png_set_filter(png, PNG_FILTER_TYPE_BASE, PNG_ALL_FILTERS);
    png_write_info(png, info);
    size_t stride = (size_t)width * (size_t)channels;
    for (int y = 0; y < height; y++) png_write_row(png, (png_const_bytep)(pixels + (size_t)y * stride));
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    *out = sink.data;
    *out_size = sink.size;
    return 0;
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

// Built twice, for AVX2 and for any x86-64, the one run chosen by the CPU at load time: the
// multiply-add loops then take four doubles at a time (800×533 RGBA: 17.6 → 14.5 ms here). The
// sums keep their order and nothing is fused (AVX2 has no FMA; contraction is off above), so
// both builds give the same samples.
#if defined(__x86_64__) && defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
int hc_gaussian_u16(
    uint16_t *pixels, int width, int height, int channels, const double *kernel, int taps, int weighted, hc_stop_fn stop, void *stop_context) {
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
        if (stop && stop(stop_context)) goto stopped;
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
        if (stop && stop(stop_context)) goto stopped;
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
stopped:
    free(padded);
    free(sums);
    free(ring);
    return -2;
}

// Where image coordinate `i` (of `length`) falls in a mask of `mask_length` whose halves hold the
// two ends: -1 between them.
static int mask_index(int i, int length, int mask_length) {
    int head = mask_length / 2;
    if (i < head) return i;
    if (i >= length - (mask_length - head)) return i - (length - mask_length);
    return -1;
}

static inline uint16_t quantum_half_up(double v) {
    if (v <= 0) return 0;
    if (v >= 65535.0) return 65535;
    return (uint16_t)(v + 0.5);
}

void hc_mask_alpha_u16(uint16_t *rgba, int width, int height, const uint16_t *mask, int mask_width, int mask_height) {
    const double scale = 1.0 / 65535.0;
    for (int y = 0; y < height; y++) {
        int my = mask_index(y, height, mask_height);
        uint16_t *p = rgba + (size_t)y * (size_t)width * 4;
        for (int x = 0; x < width; x++, p += 4) {
            int mx = my < 0 ? -1 : mask_index(x, width, mask_width);
            uint16_t m = mx < 0 ? 65535 : mask[(size_t)my * (size_t)mask_width + (size_t)mx];
            // Sa, Da and gamma as ImageMagick's CompositeIn names them: the image's alpha, the
            // mask's, their product; each colour is gamma⁻¹ · (Sa · c · Da).
            double sa = 1.0 - scale * (double)(65535 - p[3]);
            double da = 1.0 - scale * (double)(65535 - m);
            double gamma = sa * da;
            double inverse = gamma > 0 ? 1.0 / gamma : 0;
            for (int c = 0; c < 3; c++) p[c] = quantum_half_up(inverse * (sa * (double)p[c] * da));
            p[3] = (uint16_t)(65535 - quantum_half_up(65535.0 * (1.0 - gamma)));
        }
    }
}

// ImageMagick's RGB → HSL and back (gem.c's conversions, as 6.9.11 has them), operation for
// operation, so the doubles round as its do: saturation and lightness in 0…1, hue in turns.
static void rgb_to_hsl(uint16_t red, uint16_t green, uint16_t blue, double *hue, double *saturation, double *lightness) {
    const double scale = 1.0 / 65535.0;
    double r = scale * (double)red, g = scale * (double)green, b = scale * (double)blue;
    double max = r > g ? r : g, min = r < g ? r : g;
    max = max > b ? max : b;
    min = min < b ? min : b;
    double c = max - min;
    *lightness = (max + min) / 2.0;
    if (c <= 0.0) {
        *hue = 0.0;
        *saturation = 0.0;
        return;
    }
    if (max == r) {
        *hue = (g - b) / c;
        if (g < b) *hue += 6.0;
    } else if (max == g) {
        *hue = 2.0 + (b - r) / c;
    } else {
        *hue = 4.0 + (r - g) / c;
    }
    *hue *= 60.0 / 360.0;
    *saturation = *lightness <= 0.5 ? c / (2.0 * *lightness) : c / (2.0 - 2.0 * *lightness);
}

static void hsl_to_rgb(double hue, double saturation, double lightness, uint16_t *rgb) {
    double h = hue * 360.0;
    double c = lightness <= 0.5 ? 2.0 * lightness * saturation : (2.0 - 2.0 * lightness) * saturation;
    double min = lightness - 0.5 * c;
    // floor() as a truncation where h is known non-negative (the same value, without a libm call).
    if (!(h >= 0.0 && h < 360.0)) h -= 360.0 * floor(h / 360.0);
    h /= 60.0;
    double x = c * (1.0 - fabs(h - 2.0 * (double)(int)(h / 2.0) - 1.0));
    double r, g, b;
    switch ((int)h) {
    case 1: r = min + x, g = min + c, b = min; break;
    case 2: r = min, g = min + c, b = min + x; break;
    case 3: r = min, g = min + x, b = min + c; break;
    case 4: r = min + x, g = min, b = min + c; break;
    case 5: r = min + c, g = min, b = min + x; break;
    default: r = min + c, g = min + x, b = min; break;
    }
    rgb[0] = quantum_half_up(65535.0 * r);
    rgb[1] = quantum_half_up(65535.0 * g);
    rgb[2] = quantum_half_up(65535.0 * b);
}

void hc_modulate_hsl_u16(uint16_t *pixels, size_t count, int channels, double percent_lightness,
                         double percent_saturation, double percent_hue) {
    double turn = fmod(percent_hue - 100.0, 200.0) / 200.0;
    double saturation_factor = 0.01 * percent_saturation, lightness_factor = 0.01 * percent_lightness;
    for (size_t i = 0; i < count; i++) {
        uint16_t *p = pixels + i * (size_t)channels;
        double hue, saturation, lightness;
        rgb_to_hsl(p[0], p[1], p[2], &hue, &saturation, &lightness);
        hue += turn;
        saturation *= saturation_factor;
        lightness *= lightness_factor;
        hsl_to_rgb(hue, saturation, lightness, p);
    }
}

void hc_map_colors_u16(uint16_t *pixels, size_t count, int channels, const uint16_t *table) {
    for (size_t i = 0; i < count; i++) {
        uint16_t *p = pixels + i * (size_t)channels;
        p[0] = table[p[0]];
        p[1] = table[p[1]];
        p[2] = table[p[2]];
    }
}

// The compiler vectorizes this loop (interleaved loads and stores, the division by 255 as a
// multiply); the Swift loop it replaces did not, and cost as much as the resize after it.
#if defined(__x86_64__) && defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
void hc_flatten_rgba_on_white(const uint8_t *rgba, uint8_t *rgb, size_t pixels) {
    for (size_t i = 0; i < pixels; i++) {
        uint32_t a = rgba[4 * i + 3], back = (255 - a) * 255 + 127;
        rgb[3 * i] = (uint8_t)((rgba[4 * i] * a + back) / 255);
        rgb[3 * i + 1] = (uint8_t)((rgba[4 * i + 1] * a + back) / 255);
        rgb[3 * i + 2] = (uint8_t)((rgba[4 * i + 2] * a + back) / 255);
    }
}
