"""Start a problem-set folder from the registry's pinned artifacts instead of a search phase.

A set whose shapes were all tuned already (``registry/<kernel>/<shape>/<target>.json``) needs
only the cross and cover phases for a new dispatch question, such as ``--dispatch-vendor``:
this writes the folder's ``winners.json`` from each shape's pinned member, and one T4 file
per compile group of those winners for ``bench/prebuild.py`` (so the GPU machine compiles
nothing). ``ctune search --problem-set SET --set-dir DIR`` then skips the search phase
and measures every winner, the default build and (with ``--dispatch-vendor``) the vendor
call on every shape afresh.

    python bench/dispatch_seed.py --kernel kernels/gemm.cu --set t128-fp16 \
        --set-dir .device/sets/t128-fp16 --pools .device/pools
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--kernel", type=Path, required=True)
    parser.add_argument("--set", required=True, help="a problem set of the kernel's spec")
    parser.add_argument("--set-dir", type=Path, required=True)
    parser.add_argument("--registry", type=Path, default=ROOT / "registry")
    parser.add_argument("--target", default="sm90-nvidia-h200")
    parser.add_argument("--pools", type=Path, required=True, help="folder for the T4 files")
    args = parser.parse_args(argv)

    from ctune.errors import RegistryError
    from ctune.records import Candidate
    from ctune.registry.store import read_artifact_file
    from ctune.sets.problem_set import group_of
    from ctune.sets.set_layout import WINNERS
    from ctune.spec import load_spec

    spec = load_spec(args.kernel.with_suffix(".yaml"))
    winners: dict[str, dict[str, object]] = {}
    pools: dict[str, list[dict[str, object]]] = {}
    for name in spec.problem_sets[args.set]:
        path = args.registry / spec.name / name / f"{args.target}.json"
        try:
            member = read_artifact_file(path).pinned_member()
        except RegistryError as exc:
            print(f"{exc}: tune {name} first (every shape of the set needs a pinned artifact)")
            return 2
        genes = spec.space.in_today(member.candidate.as_dict())
        winners[name] = Candidate.of(spec.name, genes).to_json()
        group = group_of(spec.problem(name))
        pools.setdefault(group, []).append(
            {"configuration": genes, "invalidity": "correct", "correctness": 1}
        )
        print(f"{name}: {path.relative_to(args.registry)} pinned {member.key}", flush=True)
    args.set_dir.mkdir(parents=True, exist_ok=True)
    (args.set_dir / WINNERS).write_text(json.dumps({"winners": winners}, indent=1) + "\n")
    args.pools.mkdir(parents=True, exist_ok=True)
    for i, (group, results) in enumerate(pools.items()):
        pool = args.pools / f"{args.set}-{i}.t4.json"
        pool.write_text(json.dumps({"schema_version": "1.0.0", "results": results}, indent=1))
        first = next(n for n in spec.problem_sets[args.set] if group_of(spec.problem(n)) == group)
        print(
            f"group {group or '(none)'}: {pool} ({len(results)} winners; prebuild --problem "
            f"{first})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
