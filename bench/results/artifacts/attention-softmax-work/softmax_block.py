"""Opcode counts of each softmax block in an FMHA cubin's SASS (from a WARPGROUP.DEPBAR to the
next WARPGROUP.ARRIVE, blocks with at least 48 MUFU.EX2): how many instructions a key tile's
softmax takes per thread.

    cuobjdump -sass build.cubin > build.sass; python softmax_block.py build.sass
"""

import re
import sys
from collections import Counter

OP = re.compile(r"\s+/\*([0-9a-f]{4})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")


def main(path: str) -> None:
    text = open(path).read().split("Function : ")
    kernel = next(f for f in text if f.lstrip().startswith("_ZN7cutlass13device_kernel"))
    ops = [m.group(3) for m in map(OP.match, kernel.splitlines()) if m]
    i = 0
    while i < len(ops):
        if not ops[i].startswith("WARPGROUP.DEPBAR"):
            i += 1
            continue
        j = i + 1
        while j < len(ops) and not ops[j].startswith("WARPGROUP.ARRIVE"):
            j += 1
        block = ops[i:j]
        if sum(o.startswith("MUFU") for o in block) >= 48:
            counts = Counter(o.split(".")[0] for o in block)
            print(len(block), dict(counts.most_common(12)))
        i = j


if __name__ == "__main__":
    main(sys.argv[1])
