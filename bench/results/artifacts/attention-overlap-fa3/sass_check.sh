#!/bin/bash
# usage: sass_check.sh NAME "-D..." ; compiles attention.cu and counts MUFU.EX2 between each DEPBAR 0x1 and the next 0x0
set -e
cd "$(git rev-parse --show-toplevel)"
. .venv/bin/activate
C=.venv/lib/python3.11/site-packages/cutlass_library/source
export PATH=${CUOBJDUMP_DIR:-/tmp/cuobj/x/nvidia/cu13/bin}:$PATH
name=$1; shift
nvcc --generate-code=arch=compute_90a,code=sm_90a -std=c++17 "$@" --ftz=true --expt-relaxed-constexpr -I$C/include -I$C/examples -cubin -o ${TMPDIR:-/tmp}/$name.cubin kernels/attention.cu -Xptxas -v 2>&1 | grep -i "warn\|error\|FmhaKernel" -A1 | grep -i "warn\|error\|registers" | head -5
cuobjdump -sass ${TMPDIR:-/tmp}/$name.cubin | awk '/FmhaKernelTmaWarpSpecialized/{f=1} f' | awk -v n=$name '
/DEPBAR.LE gsb0, 0x1/ {open=1; c=0; next}
/MUFU.EX2/ { if (open) c++ }
/DEPBAR.LE gsb0, 0x0/ { if (open) { out = out " " c; open=0 } }
END { print n ": MUFU between wait1 and wait0:" out }'
