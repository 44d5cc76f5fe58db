"""Encodes x86 instructions Go's assembler does not know (AVX512_BF16,
AMX) with GNU as and objdump, for the generators gen_dotbf16.py and
gen_amx.py, which emit them into Go assembly as BYTE directives."""
import os
import re
import subprocess
import sys
import tempfile


def encode(lines):
    """Machine code bytes of each AT&T instruction line, via GNU as."""
    with tempfile.TemporaryDirectory() as d:
        src, obj = os.path.join(d, "t.s"), os.path.join(d, "t.o")
        with open(src, "w") as f:
            f.write("\n".join(lines) + "\n")
        subprocess.run(["as", "--64", src, "-o", obj], check=True)
        out = subprocess.run(["objdump", "-d", "--insn-width=15", obj], capture_output=True, text=True, check=True).stdout
    enc = []
    for l in out.splitlines():
        m = re.match(r"\s+[0-9a-f]+:\s+((?:[0-9a-f]{2} )+)\s*(\S.*)?$", l)
        if m:
            enc.append(m.group(1).split())
    if len(enc) != len(lines):
        sys.exit(f"encoded {len(enc)} instructions for {len(lines)} lines")
    return enc


def byte_line(code, comment):
    """A Go assembly line of BYTE directives for code, with a comment."""
    return "\t" + "; ".join(f"BYTE $0x{b}" for b in code) + " // " + comment
