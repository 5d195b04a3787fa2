#!/usr/bin/env python3
"""make_pic.py OUT: a 16x16 PNG (red square, blue stripe) made with zlib only, for the image scenarios."""
import struct
import sys
import zlib


def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


rows = b"".join(b"\x00" + b"".join(b"\x00\x00\xff" if 6 <= x < 10 else b"\xff\x00\x00" for x in range(16)) for _ in range(16))
png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 16, 16, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
open(sys.argv[1], "wb").write(png)
