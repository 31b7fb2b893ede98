#!/usr/bin/env python3
"""A .cu file of tapegrad as C++ for the CUDA emulator (tools/cuda_dry/emu/emu.h says how it runs).

    rewrite.py IN.cu OUT.cc

Launches `k<T><<<grid, block, smem, stream>>>(args)` become
`::tg_emu::Launch(grid, block, smem, stream).run("k<T>", k<T>, args)`, and `extern __shared__ T name[];`
a pointer to the block's dynamic shared memory. Nothing else changes (a #line keeps the original
file's lines in the compiler's messages)."""
import os
import re
import sys


def kernel_start(s, end):
    """Where the kernel's name (with its template arguments) ends at `end` begins."""
    i = end
    while i > 0 and s[i - 1].isspace():
        i -= 1
    if i > 0 and s[i - 1] == '>':
        depth = 0
        while i > 0:
            i -= 1
            if s[i] == '>':
                depth += 1
            elif s[i] == '<':
                depth -= 1
                if depth == 0:
                    break
    while i > 0 and (s[i - 1].isalnum() or s[i - 1] in '_:'):
        i -= 1
    return i


def rewrite(src):
    out = []
    pos = 0
    while True:
        at = src.find('<<<', pos)
        if at < 0:
            out.append(src[pos:])
            break
        start = kernel_start(src, at)
        name = src[start:at].strip()
        if not name:
            sys.exit(f"rewrite.py: a launch without a kernel name at offset {at}")
        close = src.find('>>>', at)
        config = src[at + 3:close]
        paren = close + 3
        while src[paren].isspace():
            paren += 1
        if src[paren] != '(':
            sys.exit(f"rewrite.py: launch of {name}: no argument list after >>>")
        after = paren + 1
        empty = src[after:].lstrip().startswith(')')
        out.append(src[pos:start])
        out.append(f'::tg_emu::Launch({config}).run("{name}", {name}{"" if empty else ", "}')
        pos = after
    text = ''.join(out)
    text = re.sub(r'extern\s+__shared__\s+(?:__align__\(\d+\)\s+)?([\w:]+)\s+(\w+)\[\];',
                  r'\1* const \2 = reinterpret_cast<\1*>(::tg_emu_now.dynamic_shared);', text)
    return text


def main():
    src_path, out_path = sys.argv[1], sys.argv[2]
    src = open(src_path, encoding='utf-8').read()
    text = f'#line 1 "{src_path}"\n' + rewrite(src)
    os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
    tmp = out_path + '.tmp'
    with open(tmp, 'w', encoding='utf-8') as f:
        f.write(text)
    os.replace(tmp, out_path)


if __name__ == '__main__':
    main()
