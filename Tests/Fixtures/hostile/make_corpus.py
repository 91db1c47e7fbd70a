#!/usr/bin/env python3
"""Writes Halcyon's hostile byte-level corpus into DIR (standard library only, deterministic).

usage: make_corpus.py DIR
The JPEG-derived cases (truncated, polyglots, EXIF junk) are made by the Swift test from a
real JPEG; these are the ones easier to write byte by byte.
"""
import os, struct, sys, zlib


def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png(width, height, bit_depth, colour_type, raw):
    ihdr = struct.pack(">IIBBBBB", width, height, bit_depth, colour_type, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", raw) + chunk(b"IEND", b"")


def gif_frames(n):
    out = bytearray(b"GIF89a" + struct.pack("<HH", 1, 1) + b"\x80\x00\x00" + b"\x00\x00\x00\xff\xff\xff")
    for _ in range(n):
        out += b"\x21\xf9\x04\x00\x01\x00\x00\x00"          # graphic control: 1/100 s
        out += b"\x2c" + struct.pack("<HHHH", 0, 0, 1, 1) + b"\x00"
        out += b"\x02\x02\x44\x01\x00"                       # one pixel, LZW
    return bytes(out + b"\x3b")


def gif_sizes(canvas, sizes):
    """A GIF of frames of the given (width, height), each holding only a clear and an end code:
    a few bytes, whatever the sizes it declares."""
    out = bytearray(b"GIF89a" + struct.pack("<HH", *canvas) + b"\x00\x00\x00")
    for w, h in sizes:
        out += b"\x21\xf9\x04\x00\x0a\x00\x00\x00"
        out += b"\x2c" + struct.pack("<HHHH", 0, 0, w, h) + b"\x80" + b"\x00\x00\x00\xff\xff\xff"
        out += b"\x02\x01\x2c\x00"
    return bytes(out + b"\x3b")


CASES = {
    # Declares 100000×100000 in a 60-byte file.
    "bomb-dimensions.png": png(100_000, 100_000, 8, 2, zlib.compress(b"\x00" * 4)),
    # A real 16000×16000 1-bit image (256 Mpx) whose IDAT inflates ~32 MB from ~32 KB.
    "bomb-zlib.png": png(16_000, 16_000, 1, 0, zlib.compress(b"\x00" * (16_000 * (16_000 // 8 + 1)), 9)),
    # A real 10000×10000 1-bit image (100 MP, within the default pixel budget) in ~15 KB.
    "gray-100mp.png": png(10_000, 10_000, 1, 0, zlib.compress(b"\x00" * (10_000 * (10_000 // 8 + 1)), 9)),
    # 5,000 frames of 1×1.
    "bomb-frames.gif": gif_frames(5_000),
    # A 1×1 first frame, then a 16000×16000 one (only the first frame used to be checked).
    "bomb-later-frame.gif": gif_sizes((1, 1), [(1, 1), (16_000, 16_000)]),
    # Tiny frames on a 9000×9000 canvas: coalescing would make each one 81 MP.
    "bomb-canvas.gif": gif_sizes((9_000, 9_000), [(1, 1)] * 3),
    # Scripted formats under image names: ImageMagick must never interpret them.
    "svg-as.jpg": b'<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg" width="10" height="10">'
                  b'<image href="file:///etc/passwd" width="10" height="10"/></svg>',
    "mvg-as.png": b"push graphic-context\nviewbox 0 0 640 480\nimage over 0,0 0,0 'file:///etc/passwd'\npop graphic-context\n",
    "msl-as.gif": b'<?xml version="1.0" encoding="UTF-8"?><image><read filename="/etc/passwd"/><write filename="/tmp/halcyon-pwned"/></image>',
    "ps-as.jpg": b"%!PS-Adobe-3.0\n/Helvetica findfont 12 scalefont setfont 10 10 moveto (pwned) show showpage\n",
    "empty.jpg": b"",
    # Images of no pixels: a PNG that declares 0×0, a GIF whose screen and frame are 0×0.
    "zero-size.png": png(0, 0, 8, 2, zlib.compress(b"")),
    "zero-size.gif": gif_sizes((0, 0), [(0, 0)]),
    # Raster formats Halcyon does not decode, under other names: unsupported, not "not an image".
    "psd-as.jpg": b"8BPS\x00\x01" + b"\x00" * 6 + struct.pack(">HIIHH", 3, 4, 4, 8, 3) + b"\x00" * 64,
    "sgi-as.png": b"\x01\xda\x00\x01\x00\x03" + struct.pack(">HHH", 4, 4, 3) + b"\x00" * 500,
    "tga-as.gif": b"\x00\x00\x02" + b"\x00" * 9 + struct.pack("<HH", 2, 2) + b"\x18\x00" + b"\x7f" * 12
                  + b"\x00" * 8 + b"TRUEVISION-XFILE.\x00",
    # A GIF header followed by JavaScript (a GIF/JS polyglot).
    "polyglot-gifjs.gif": b"GIF89a/*\x00\x00\x00\x00*/=1;alert(document.domain);//" + b"\x00" * 32,
}

if __name__ == "__main__":
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, data in CASES.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    print("\n".join(sorted(CASES)))
