#!/usr/bin/env python3
"""The Pillow peer of `halcyon bench` W1: Pillow with draft() (JPEG DCT scaling, Pillow's
shrink-on-load) in one long-lived process per core, each taking files from a shared queue.

usage: bench-pillow.py OUT_DIR PROCESSES FILE...
Writes OUT_DIR/<index>.jpg (320x320 fill, Lanczos, JPEG q82) for every FILE; exit 1 on any failure.
"""
import multiprocessing as mp
import os
import sys

from PIL import Image, ImageOps

SIZE = (320, 320)


def convert(job):
    index, path, out_dir = job
    try:
        with Image.open(path) as im:
            if im.format == "JPEG":
                # The smallest DCT scale that still covers the fill (draft never goes below it).
                scale = max(SIZE[0] / im.width, SIZE[1] / im.height)
                im.draft("RGB", (max(1, round(im.width * scale)), max(1, round(im.height * scale))))
            im = im.convert("RGBA") if im.mode in ("RGBA", "LA", "P") else im.convert("RGB")
            if im.mode == "RGBA":  # JPEG has no alpha: flatten onto white, as Halcyon does
                white = Image.new("RGB", im.size, (255, 255, 255))
                white.paste(im, mask=im.getchannel("A"))
                im = white
            ImageOps.fit(im, SIZE, Image.LANCZOS).save(os.path.join(out_dir, f"{index}.jpg"), "JPEG", quality=82)
        return True
    except Exception as e:  # noqa: BLE001 — reported, counted
        print(f"{path}: {e}", file=sys.stderr)
        return False


def main():
    out_dir, processes, files = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    with mp.Pool(processes) as pool:
        ok = all(pool.imap_unordered(convert, [(i, f, out_dir) for i, f in enumerate(files)], chunksize=1))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
