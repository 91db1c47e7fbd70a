#!/usr/bin/env python3
"""The Pillow peer of `halcyon bench`: Pillow with draft() (JPEG DCT scaling, Pillow's
shrink-on-load) in one long-lived process per core, each taking files from a shared queue.

usage: bench-pillow.py [--w2|--w3] OUT_DIR PROCESSES FILE...
W1 (default): writes OUT_DIR/<index>.jpg, 320x320 fill, Lanczos, JPEG q82, for every FILE.
W2 (--w2): decodes each FILE once and writes OUT_DIR/<index>.jpg (as W1), <index>.webp
(1024x1024 fit, q80) and <index>.png (64x64 fill).
W3 (--w3): decodes each FILE once (alpha kept) and writes OUT_DIR/<index>.png (800x800 fit,
GaussianBlur(2), corners rounded to 24 px, RGB × 0.8 as overlay(#000000, fraction=0.8)) and
<index>.webp (640x640 fill, UnsharpMask(1), Contrast 1.2, Color 1.3, q80).
Prints "ms <index> <milliseconds>" per file; exit 1 on any failure.
"""
import multiprocessing as mp
import os
import sys
import time

from PIL import Image, ImageChops, ImageDraw, ImageEnhance, ImageFilter, ImageOps


def load(path, cover):
    """Opens `path`, letting JPEG decode at the smallest DCT scale that still covers `cover`
    (a (width, height) box, or a function of the image size giving one); flattens alpha onto
    white (as Halcyon does for outputs without alpha)."""
    im = Image.open(path)
    if im.format == "JPEG":
        w, h = cover(im.width, im.height)
        im.draft("RGB", (max(1, round(w)), max(1, round(h))))
    im = im.convert("RGBA") if im.mode in ("RGBA", "LA", "P") else im.convert("RGB")
    if im.mode == "RGBA":
        white = Image.new("RGB", im.size, (255, 255, 255))
        white.paste(im, mask=im.getchannel("A"))
        im = white
    return im


def fill_cover(size):
    def cover(w, h):
        k = max(size[0] / w, size[1] / h)
        return w * k, h * k
    return cover


def w1(index, path, out_dir):
    im = load(path, fill_cover((320, 320)))
    ImageOps.fit(im, (320, 320), Image.LANCZOS).save(os.path.join(out_dir, f"{index}.jpg"), "JPEG", quality=82)


def w2(index, path, out_dir):
    im = load(path, lambda w, h: (w * min(1, 1024 / max(w, h)), h * min(1, 1024 / max(w, h))))
    ImageOps.fit(im, (320, 320), Image.LANCZOS).save(os.path.join(out_dir, f"{index}.jpg"), "JPEG", quality=82)
    fit = im.copy()
    fit.thumbnail((1024, 1024), Image.LANCZOS)
    fit.save(os.path.join(out_dir, f"{index}.webp"), "WEBP", quality=80)
    ImageOps.fit(im, (64, 64), Image.LANCZOS).save(os.path.join(out_dir, f"{index}.png"), "PNG")


def w3(index, path, out_dir):
    im = Image.open(path)
    if im.format == "JPEG":
        w, h = im.size
        k = max(800 / max(w, h), 640 / min(w, h))
        im.draft("RGB", (round(w * k), round(h * k)))
    im = im.convert("RGBA") if im.mode in ("RGBA", "LA", "P") else im.convert("RGB")
    alpha = im.getchannel("A") if im.mode == "RGBA" else None
    rgb = im.convert("RGB")

    a = im.copy()
    a.thumbnail((800, 800), Image.LANCZOS)
    a = a.filter(ImageFilter.GaussianBlur(2)).convert("RGBA")
    mask = Image.new("L", a.size, 0)
    ImageDraw.Draw(mask).rounded_rectangle((0, 0, a.width - 1, a.height - 1), radius=24, fill=255)
    out = ImageEnhance.Brightness(a.convert("RGB")).enhance(0.8)
    out.putalpha(ImageChops.multiply(a.getchannel("A"), mask))
    out.save(os.path.join(out_dir, f"{index}.png"), "PNG")

    b = ImageOps.fit(rgb, (640, 640), Image.LANCZOS).filter(ImageFilter.UnsharpMask(radius=1, percent=100, threshold=0))
    b = ImageEnhance.Color(ImageEnhance.Contrast(b).enhance(1.2)).enhance(1.3)
    if alpha is not None:
        b.putalpha(ImageOps.fit(alpha, (640, 640), Image.LANCZOS))
    b.save(os.path.join(out_dir, f"{index}.webp"), "WEBP", quality=80)


def run(job):
    work, index, path, out_dir = job
    started = time.perf_counter()
    try:
        work(index, path, out_dir)
        return index, (time.perf_counter() - started) * 1000
    except Exception as e:  # noqa: BLE001 — reported, counted
        print(f"{path}: {e}", file=sys.stderr)
        return index, None


def main():
    args = sys.argv[1:]
    work = w1
    if args and args[0] in ("--w2", "--w3"):
        work, args = (w2 if args[0] == "--w2" else w3), args[1:]
    out_dir, processes, files = args[0], int(args[1]), args[2:]
    with mp.Pool(processes) as pool:
        # Nothing is printed while the pool lives: a worker forked while this process holds
        # stdout's lock would inherit it held.
        done = list(pool.imap_unordered(run, [(work, i, f, out_dir) for i, f in enumerate(files)], chunksize=1))
    for index, ms in done:
        if ms is not None:
            print(f"ms {index} {ms:.2f}")
    sys.exit(0 if all(ms is not None for _, ms in done) else 1)


if __name__ == "__main__":
    main()
