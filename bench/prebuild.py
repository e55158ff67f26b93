"""Compile a pool of configurations into the build cache on a CPU machine (no GPU).

A CUTLASS build takes ~40-75 s of one core; a GPU machine lent for minutes should spend
them measuring. This compiles every configuration of a T4 file (``--pool``; runtime genes
do not matter to a build, so variants that differ only in them compile once) for one
problem's compile group, ``--jobs`` at a time, into ``CTUNE_CACHE_DIR``, and packs the
builds into one archive that ``bench/device.sh`` unpacks on the GPU machine
(``.device/carry/*.tgz``). ``ctune search --warm-start POOL`` then measures them without
compiling.

    python bench/prebuild.py --kernel kernels/gemm.cu --problem llm8b-o-t16 \
        --pool bench/pools/gemm-decode.t4.json --jobs 2 --pack .device/carry/pool.tgz
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--kernel", type=Path, required=True)
    parser.add_argument("--problem", required=True, help="any problem of the compile group")
    parser.add_argument("--pool", type=Path, required=True, help="T4 file of configurations")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--pack", type=Path, help="write the builds into this .tgz")
    args = parser.parse_args(argv)

    from ctune.cli.common import load
    from ctune.compile.nvcc import NvccCompiler
    from ctune.config import resolve
    from ctune.exchange.t4 import candidates, read_t4

    cfg = resolve({"jobs": args.jobs})
    spec, toolchain = load(args.kernel, cfg)
    problem = spec.problem(args.problem)
    mapped = candidates(spec.name, spec.space, read_t4(args.pool), problem.dims)
    found = mapped.candidates
    wanted = {spec.space.build_group(c.genes): c for c in [spec.default_candidate(), *found]}
    print(
        f"{len(found)} configurations ({mapped.invalid} not valid here, {mapped.repeated} "
        f"repeated), {len(wanted)} builds "
        f"(the default included), {args.jobs} at a time",
        flush=True,
    )
    start = time.monotonic()
    keys, failed = [], 0
    with NvccCompiler.from_settings(spec, toolchain, cfg) as compiler:
        futures = [(c, compiler.submit(c, problem)) for c in wanted.values()]
        for i, (cand, future) in enumerate(futures, 1):
            build = future.result()
            genes = " ".join(f"{k}={v}" for k, v in cand.as_dict().items() if k in spec.space)
            print(
                f"[{i}/{len(futures)}] {build.outcome.value} {build.compile_s:.0f} s "
                f"{build.build_key[:12]} {genes}",
                flush=True,
            )
            if build.outcome.is_ok:
                keys.append(build.build_key)
            else:
                failed += 1
                print(f"  {build.log_tail.strip().splitlines()[-1] if build.log_tail else ''}")
    print(f"built {len(keys)}, failed {failed} in {time.monotonic() - start:.0f} s", flush=True)
    if args.pack:
        from carry_builds import pack_keys

        pack_keys(args.pack, keys, cfg.cache_dir / "builds")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
