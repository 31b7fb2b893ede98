#!/usr/bin/env python3
"""Writes tests/golden/xxh64.txt: XXH64 (seed 0) of byte strings of several lengths, computed by the
reference implementation (libxxhash, Debian's libxxhash0, through ctypes). Byte i of a string is
(i * 131 + 7) mod 256. Lines: "LENGTH HEX". Run: python3 tools/make_xxh64_golden.py"""
import ctypes
import pathlib

lib = ctypes.CDLL("libxxhash.so.0")
lib.XXH64.restype = ctypes.c_uint64
lib.XXH64.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint64]
lines = ["# XXH64, seed 0, of bytes (i*131+7) mod 256, i < LENGTH; from libxxhash " "via tools/make_xxh64_golden.py"]
for n in [0, 1, 3, 4, 5, 7, 8, 9, 15, 16, 31, 32, 33, 63, 64, 100, 1000, 4099, 1 << 20]:
    data = bytes((i * 131 + 7) & 255 for i in range(n))
    lines.append(f"{n} {lib.XXH64(data, n, 0):016x}")
out = pathlib.Path(__file__).resolve().parent.parent / "tests/golden/xxh64.txt"
out.write_text("\n".join(lines) + "\n")
print(f"wrote {out}")
