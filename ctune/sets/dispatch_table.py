"""The dispatch table of a problem-set search: which build serves which shape, and the rule
for shapes the table does not name, as JSON and as a C++ header that agree on both.

The rule (``lookup``), the same in Python and in the header:

Only the entries that may serve the shape take part: its dtype, and its dims within the
entry's ranges (``ctune.sets.dispatch_bounds``: the dims its build's compile group fixes and
the ranges the spec's restrictions allow its genes).

1. the entry with the same dims and dtype;
2. else, among entries of the same dtype and the same dims except the bucket dim (M, the
   token count of an LLM linear), the one nearest in log2 of the bucket dim (ties: the
   larger), because a build tuned for a nearby batch size keeps its tile economics;
3. else, among entries of the same dtype, the one nearest in the sum of log2 distances over
   all dims (ties: the earlier entry; a dim below 1 counts as 1, and two unequal values
   at least one octave apart);
4. else none: the caller's default build.
"""

from __future__ import annotations

import json
import logging
import math
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctune.errors import UserError
from ctune.files import MAX_DATA_BYTES, InputFileError, read_text_capped
from ctune.records import Candidate
from ctune.sets.dispatch_bounds import HIGH, LOW, Bounds, compiled_dims, entry_bounds, serves
from ctune.sets.set_layout import (
    HEADER,
    MATRIX,
    TABLE,
    VENDOR_BUILD,
    best_rows,
    compiled_build_id,
    read_rows,
)
from ctune.writes import write_atomic

if TYPE_CHECKING:
    from ctune.objective.spec import ObjectiveSpec
    from ctune.sets.dispatch import Cover, Matrix
    from ctune.sets.set_layout import SetOptions
    from ctune.spec import KernelSpec, Problem

log = logging.getLogger(__name__)

KIND = "ctune-dispatch"
VERSION = 1
BUCKET_DIM = "M"


@dataclass(frozen=True)
class Entry:
    problem: str
    dims: tuple[int, ...]
    dtype: str
    build: int  # index into the table's builds
    runtime: tuple[int, ...]
    #: per dim, the closed range of values the entry may serve (empty: every shape)
    bounds: Bounds = ()


@dataclass(frozen=True)
class Table:
    kernel: str
    dim_names: tuple[str, ...]
    runtime_names: tuple[str, ...]
    builds: tuple[dict[str, Any], ...]
    entries: tuple[Entry, ...]

    def bucket(self) -> int:
        return self.dim_names.index(BUCKET_DIM) if BUCKET_DIM in self.dim_names else 0

    def lookup(self, dims: Sequence[int], dtype: str) -> Entry | None:
        """The module docstring's rule."""
        same = [e for e in self.entries if e.dtype == dtype and serves(e.bounds, dims)]
        for e in same:
            if tuple(e.dims) == tuple(dims):
                return e
        b = self.bucket()
        others = [i for i in range(len(dims)) if i != b]
        row = [e for e in same if all(e.dims[i] == dims[i] for i in others)]
        if row:
            return min(row, key=lambda e: (_ratio(e.dims[b], dims[b]), -e.dims[b]))
        if same:
            return min(
                same, key=lambda e: sum(_dist(x, y) for x, y in zip(e.dims, dims, strict=True))
            )
        return None


def _ratio(a: int, b: int) -> Fraction:
    """2 ** (log2 distance) of two bucket values, exact: equal distances tie exactly (the
    header compares the same ratios by cross-multiplying)."""
    a, b = max(a, 1), max(b, 1)
    return Fraction(max(a, b), min(a, b))


def _dist(a: int, b: int) -> float:
    """The log2 distance of two dim values; unequal values at least one octave apart (a 0
    and a 1, as CAUSAL takes, are not the same value)."""
    d = abs(math.log2(max(a, 1)) - math.log2(max(b, 1)))
    return max(d, 1.0) if a != b and d < 1 and min(a, b) < 1 else d


def dtype_of(spec: KernelSpec, problem: Problem) -> str:
    """A shape's dtype: its first input's."""
    for arg in spec.args:
        if arg.role in ("input", "inout"):
            return arg.dtype_for(problem)
    return ""


def set_dims(spec: KernelSpec, problems: Sequence[Problem]) -> tuple[str, ...]:
    """The dims every problem of a set has: one table keys its entries by them all."""
    if not problems:
        return ()
    names = tuple(problems[0].dims)
    odd = [p.name for p in problems if set(p.dims) != set(names)]
    if odd:
        raise UserError(
            f"problem set of {spec.name}: {', '.join(odd)} have other dims than "
            f"{problems[0].name} ({', '.join(names)}); one dispatch table needs the same dims"
        )
    return names


def build_table(
    spec: KernelSpec,
    problems: Sequence[Problem],
    matrix: Matrix,
    cover: Cover,
    rows: Sequence[Mapping[str, Any]],
    flags: Mapping[str, Sequence[str]],
) -> tuple[Table, list[dict[str, Any]]]:
    """The table, and the per-shape rows of the JSON (times, losses, best builds)."""
    chosen = {b: i for i, b in enumerate(cover.builds)}
    cells = best_rows(rows)
    dim_names = set_dims(spec, problems)
    runtime_names = tuple(g.name for g in spec.genes if g.name in spec.runtime_names)
    builds = []
    for b in cover.builds:
        any_row = next(r for (s, bb), r in cells.items() if bb == b)
        compiled = {k: v for k, v in any_row["genes"].items() if k not in spec.runtime_names}
        served = sorted(s for s, x in cover.assignment.items() if x == b)
        argv = () if b == VENDOR_BUILD else flags[b]  # the vendor call compiles nothing
        builds.append(
            {
                "id": b,
                "group": matrix.build_group.get(b, ""),
                "genes": compiled,
                "nvcc_flags": list(argv),
                "flags_line": " ".join(shlex.quote(f) for f in argv),
                "serves": served,
                **({"vendor": spec.vendor_name} if b == VENDOR_BUILD else {}),
            }
        )
    entries, shapes = [], []
    pinned = compiled_dims(problems, dim_names, [dtype_of(spec, p) for p in problems])
    for p in problems:
        if p.name not in cover.assignment:
            continue
        b = cover.assignment[p.name]
        row = cells[p.name, b]
        vendor = b == VENDOR_BUILD  # no runtime genes: zeros in the header, {} in the JSON
        runtime = tuple(0 if vendor else _int(row["genes"][n], n) for n in runtime_names)
        dtype = dtype_of(spec, p)
        dims = {d: p.dims[d] for d in dim_names}
        bounds = entry_bounds(spec, None if vendor else row["genes"], dims, pinned)
        entries.append(Entry(p.name, tuple(dims.values()), dtype, chosen[b], runtime, bounds))
        best = cover.best[p.name]
        shapes.append(
            {
                "problem": p.name,
                "dims": dict(p.dims),
                "dtype": dtype,
                "build": b,
                "candidate": row["candidate"],
                "runtime": {} if vendor else dict(zip(runtime_names, runtime, strict=True)),
                "value": row["value"],
                "best_build": best,
                "best_value": cells[p.name, best]["value"],
                "loss_vs_per_shape_best": cover.losses[p.name],
                "serves_dims": bounds_json(dim_names, bounds),
            }
        )
    table = Table(spec.name, dim_names, runtime_names, tuple(builds), tuple(entries))
    return table, shapes


def bounds_json(dim_names: Sequence[str], bounds: Bounds) -> dict[str, list[int | None]]:
    """The bounded dims of an entry's ranges, ``null`` for an open end."""
    out: dict[str, list[int | None]] = {}
    for d, (lo, hi) in zip(dim_names, bounds, strict=False):
        if (lo, hi) != (LOW, HIGH):
            out[d] = [None if lo == LOW else lo, None if hi == HIGH else hi]
    return out


def bounds_from_json(dim_names: Sequence[str], data: Mapping[str, Any]) -> Bounds:
    """An entry's ranges back from ``serves_dims`` (absent in tables written before it: every
    shape of the dtype)."""
    ranges = data.get("serves_dims")
    if not ranges:
        return ()
    pairs = [ranges.get(d) or [None, None] for d in dim_names]
    return tuple((LOW if a is None else int(a), HIGH if b is None else int(b)) for a, b in pairs)


def _int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise UserError(f"runtime gene {name} = {value!r}: the dispatch header takes integers")
    return value


def to_json(
    table: Table, shapes: list[dict[str, Any]], cover: Cover, meta: Mapping[str, Any]
) -> dict[str, Any]:
    return {
        "kind": KIND,
        "version": VERSION,
        **meta,
        "margin": cover.margin,
        "rule": RULE,
        "dims": list(table.dim_names),
        "runtime_genes": list(table.runtime_names),
        "builds": list(table.builds),
        "shapes": shapes,
        "unservable": list(cover.unservable),
        "max_loss_vs_per_shape_best": cover.max_loss,
        "shipped": list(cover.shipped),
    }


RULE = (
    "among entries whose ranges hold the dims (compile group, restrictions): "
    "exact dims and dtype; else same dtype and same dims but M: nearest log2 M (ties: larger); "
    "else same dtype: nearest summed log2 distance (ties: earlier); else none (default build)"
)


def from_json(data: Mapping[str, Any]) -> Table:
    """A table back from its JSON (``ctune dispatch`` re-renders the header from it)."""
    if data.get("kind") != KIND:
        raise UserError(f"not a dispatch table (kind {data.get('kind')!r}, expected {KIND!r})")
    dim_names = tuple(data["dims"])
    runtime_names = tuple(data["runtime_genes"])
    index = {b["id"]: i for i, b in enumerate(data["builds"])}
    entries = tuple(
        Entry(
            s["problem"],
            tuple(int(s["dims"][d]) for d in dim_names),
            s["dtype"],
            index[s["build"]],
            tuple(int(s["runtime"][n]) if s["runtime"] else 0 for n in runtime_names),
            bounds_from_json(dim_names, s),
        )
        for s in data["shapes"]
    )
    return Table(str(data["kernel"]), dim_names, runtime_names, tuple(data["builds"]), entries)


def with_bounds(data: Mapping[str, Any], spec: KernelSpec) -> dict[str, Any]:
    """A table's JSON with each shape's ``serves_dims`` worked out from the spec (a table
    written before entries recorded them): its build's genes, runtime genes and problem."""
    dim_names = tuple(data["dims"])
    problems = [spec.problem(s["problem"]) for s in data["shapes"]]
    pinned = compiled_dims(problems, dim_names, [s["dtype"] for s in data["shapes"]])
    genes = {b["id"]: b.get("genes") for b in data["builds"]}
    shapes = []
    for s, p in zip(data["shapes"], problems, strict=True):
        vendor = s["build"] == VENDOR_BUILD
        values = None if vendor else {**genes[s["build"]], **s["runtime"]}
        bounds = entry_bounds(spec, values, {d: p.dims[d] for d in dim_names}, pinned)
        shapes.append({**s, "serves_dims": bounds_json(dim_names, bounds)})
    return {**data, "rule": RULE, "shapes": shapes}


def build_ids_today(spec: KernelSpec, builds: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each table build's id as a search over today's space names it (a table written before
    a gene was added recorded an id over the genes of its day); the recorded id where the
    build lacks its genes, serves no problem the spec still has, or is the vendor call."""
    known = set(spec.problem_names())
    ids = []
    for b in builds:
        serves = [name for name in b.get("serves", ()) if name in known]
        genes = b.get("genes")
        if not serves or not isinstance(genes, Mapping) or b["id"] == VENDOR_BUILD:
            ids.append(str(b["id"]))
        else:
            ids.append(compiled_build_id(spec, genes, spec.problem(serves[0]).defines))
    return ids


def shipped_builds(paths: Sequence[Path], spec: KernelSpec) -> frozenset[str]:
    """The builds that these dispatch tables (JSON) of ``spec``'s kernel already ship, by
    their ids in today's space (:func:`build_ids_today`)."""
    kernel = spec.name

    def refuse(path: Path, why: str, fix: str = "that a problem-set search wrote") -> UserError:
        return UserError(f"--dispatch-shipped {path}: {why}; give a dispatch.json {fix}")

    ids: set[str] = set()
    for path in paths:
        try:
            data = json.loads(read_text_capped(path, MAX_DATA_BYTES, "--dispatch-shipped"))
        except InputFileError as exc:
            raise refuse(path, f"not a readable dispatch table ({exc.reason})") from None
        except (OSError, ValueError) as exc:
            raise refuse(path, f"not a readable dispatch table ({exc})") from None
        try:
            table = from_json(data) if isinstance(data, dict) else None
        except UserError as exc:
            raise refuse(path, str(exc)) from None
        except (KeyError, TypeError, ValueError) as exc:
            raise refuse(path, f"a dispatch table without {exc}") from None
        if table is None or table.kernel != kernel:
            found = table.kernel if table else type(data).__name__
            raise refuse(path, f"a table of {found}, not of {kernel}", f"of {kernel}")
        try:
            ids.update(build_ids_today(spec, table.builds))
        except (KeyError, TypeError, ValueError, UserError) as exc:  # a build edited by hand
            raise refuse(path, f"a build that does not read ({exc!s:.120})") from None
    return frozenset(ids)


def _c_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _c_int(value: int) -> str:
    """An int64 literal; the open ends as the limits (``-9223372036854775808`` is not one)."""
    if value == LOW:
        return "INT64_MIN"
    return "INT64_MAX" if value == HIGH else str(value)


def _c_name(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "_", text.lower())


def _entry_line(table: Table, e: Entry) -> str:
    """One entry of ``kEntries``: dims, dtype, build, runtime genes, the ranges it serves."""
    bounds = e.bounds or ((LOW, HIGH),) * len(table.dim_names)
    dims = ", ".join(str(d) for d in e.dims) or "0"
    rt = ", ".join(str(v) for v in e.runtime) or "0"
    lo = ", ".join(_c_int(a) for a, _ in bounds) or "0"
    hi = ", ".join(_c_int(b) for _, b in bounds) or "0"
    return (
        f"    {{{{{dims}}}, {_c_string(e.dtype)}, {e.build}, {{{rt}}}, {{{lo}}}, {{{hi}}}}},"
        f"  // {e.problem}"
    )


#: the lookup in C++; {b} is the bucket dim's index
_LOOKUP = """\
inline double dist(std::int64_t a, std::int64_t b) {{
  double d = std::fabs(std::log2(double(a > 1 ? a : 1)) - std::log2(double(b > 1 ? b : 1)));
  return (a != b && d < 1 && (a < 1 || b < 1)) ? 1.0 : d;
}}

/* The entry for a shape by the rule above; nullptr: use the default build. */
inline const Entry* lookup(const std::int64_t* dims, const char* dtype) {{
  const Entry* row = nullptr;
  const Entry* near = nullptr;
  std::int64_t row_n = 0, row_d = 1;  // the row entry's bucket ratio, row_n / row_d >= 1
  double near_d = 0;
  for (int i = 0; i < kEntries_n; ++i) {{
    const Entry& e = kEntries[i];
    if (std::strcmp(e.dtype, dtype) != 0) continue;
    bool serves = true, same = true, same_but_bucket = true;
    double sum = 0;
    for (int d = 0; d < kDims; ++d) {{
      if (dims[d] < e.lo[d] || dims[d] > e.hi[d]) serves = false;
      if (e.dims[d] != dims[d]) {{
        same = false;
        if (d != {b}) same_but_bucket = false;
      }}
      sum += dist(e.dims[d], dims[d]);
    }}
    if (!serves) continue;
    if (same) return &e;
    if (same_but_bucket) {{
      std::int64_t x = e.dims[{b}] > 1 ? e.dims[{b}] : 1, y = dims[{b}] > 1 ? dims[{b}] : 1;
      std::int64_t n = x > y ? x : y, m = x > y ? y : x;
      bool tie = row && n * row_d == row_n * m && e.dims[{b}] > row->dims[{b}];
      if (!row || n * row_d < row_n * m || tie) {{
        row = &e;
        row_n = n;
        row_d = m;
      }}
    }}
    if (!near || sum < near_d) {{
      near = &e;
      near_d = sum;
    }}
  }}
  return row ? row : near;
}}
"""


def header(table: Table, origin: str, set_name: str = "") -> str:
    """C++17: the builds, the entries and ``lookup`` implementing the same rule. The
    namespace and include guard name the kernel and the set, so that two sets' headers
    include side by side."""
    ns = "ctune_dispatch_" + _c_name(table.kernel) + (f"_{_c_name(set_name)}" if set_name else "")
    guard = ns.upper() + "_H"
    nd, nr = len(table.dim_names), len(table.runtime_names)
    vendor = next((i for i, x in enumerate(table.builds) if x["id"] == VENDOR_BUILD), -1)
    vendor_name = str(table.builds[vendor]["vendor"]) if vendor >= 0 else "none in this table"
    vendor_name = vendor_name.replace("*/", "* /")  # free text, inside a C comment
    lines = [
        f"/* Generated by ctune from {origin}. Do not edit.",
        f"   Rule: {RULE}. */",
        f"#ifndef {guard}",
        f"#define {guard}",
        "",
        "#include <cmath>",
        "#include <cstdint>",
        "#include <cstring>",
        "",
        f"namespace {ns} {{",
        "",
        f"constexpr int kDims = {max(nd, 1)};  // {', '.join(table.dim_names) or 'none'}",
        f"constexpr int kRuntime = {max(nr, 1)};  // {', '.join(table.runtime_names) or 'none'}",
        "struct Build { const char* id; const char* nvcc_flags; };",
        f"/* The build index that means: call the vendor library ({vendor_name}). */",
        f"constexpr int kVendorBuild = {vendor};",
        "/* lo[d] <= dims[d] <= hi[d]: the shapes the entry's build can run. */",
        "struct Entry { std::int64_t dims[kDims]; const char* dtype; int build; "
        "std::int64_t runtime[kRuntime]; std::int64_t lo[kDims]; std::int64_t hi[kDims]; };",
        "",
        "/* A table without builds or entries holds one placeholder (ISO C++ has no empty",
        "   array); the counts below say how many are real. */",
        "inline constexpr Build kBuilds[] = {",
    ]
    lines += [f"    {{{_c_string(x['id'])}, {_c_string(x['flags_line'])}}}," for x in table.builds]
    lines += [] if table.builds else ["    {nullptr, nullptr},  // none"]
    lines += ["};", f"constexpr int kBuilds_n = {len(table.builds)};", ""]
    lines += ["inline constexpr Entry kEntries[] = {"]
    lines += [_entry_line(table, e) for e in table.entries]
    lines += [] if table.entries else ['    {{0}, "", -1, {0}, {0}, {0}},  // none']
    lines += ["};", f"constexpr int kEntries_n = {len(table.entries)};", ""]
    lines += [*_LOOKUP.format(b=table.bucket()).splitlines(), ""]
    if nd:
        params = ", ".join(f"std::int64_t dim_{n}" for n in table.dim_names)
        args = ", ".join(f"dim_{n}" for n in table.dim_names)
        lines += [
            f"inline const Entry* lookup({params}, const char* dtype) {{",
            f"  const std::int64_t dims[kDims] = {{{args}}};",
            "  return lookup(dims, dtype);",
            "}",
            "",
        ]
    lines += [f"}}  // namespace {ns}", "", f"#endif  // {guard}", ""]
    return "\n".join(lines)


def measured_on(rows: Sequence[Mapping[str, Any]]) -> str:
    """The GPU the matrix's cells were measured on, as its rows name it ("" where none does:
    rows written before they named it); several GPUs are all named."""
    names = sorted({str(r["device"]) for r in rows if r.get("device")})
    return " + ".join(names)


def table_device(rows: Sequence[Mapping[str, Any]], measurer: Any) -> str:
    """The table's ``device``: the GPUs its rows were measured on (every one named; a warning
    line where there are several), else this call's GPU (rows written before they named
    it)."""
    device = measured_on(rows)
    if " + " in device:
        log.warning("the dispatch matrix was measured on several GPUs: %s", device)
    return device or ((measurer.device_name if measurer is not None else None) or "")


def _argv(spec: KernelSpec, compiler: Any, cand: Candidate, problem: Problem) -> list[str]:
    """The build's nvcc argv, without compiling where the compiler can say it (offline)."""
    name = "kernel.so" if spec.entry_kind == "launcher" else "kernel.cubin"
    argv = compiler.argv(cand, problem, Path(name))
    return list(argv) if argv is not None else list(compiler.build(cand, problem).argv)


def write_table(
    spec: KernelSpec,
    objective: ObjectiveSpec,
    opts: SetOptions,
    problems: Sequence[Problem],
    matrix: Matrix,
    cover: Cover,
    compiler: Any,
    measurer: Any,
) -> tuple[Path, Path]:
    """dispatch.json and dispatch.h in the set's folder."""
    from ctune.compile.command import tuned_flags

    rows = read_rows(opts.set_dir / MATRIX)
    cells = best_rows(rows)
    by_name = {p.name: p for p in problems}
    flags: dict[str, list[str]] = {}
    for b in cover.builds:
        if b == VENDOR_BUILD:
            continue  # nothing compiled: no flags
        shape, row = next((s, r) for (s, bb), r in cells.items() if bb == b)
        flags[b] = tuned_flags(
            _argv(spec, compiler, Candidate.of(spec.name, row["genes"]), by_name[shape])
        )
    table, shapes = build_table(spec, problems, matrix, cover, rows, flags)
    device = table_device(rows, measurer)
    meta = {
        "kernel": spec.name,
        "problem_set": opts.set_name,
        "objective": objective.objectives[0].text,
        "device": device,
    }
    data = to_json(table, shapes, cover, meta)
    json_path = opts.set_dir / TABLE
    write_atomic(json_path, json.dumps(data, indent=1, sort_keys=True) + "\n")
    header_path = opts.set_dir / HEADER
    origin = f"the problem-set search {opts.set_name} of {spec.name}"
    text = header(table, origin + (f" on {device}" if device else ""), opts.set_name)
    write_atomic(header_path, text)
    return json_path, header_path


__all__ = [
    "RULE",
    "Entry",
    "Table",
    "build_ids_today",
    "build_table",
    "from_json",
    "header",
    "measured_on",
    "shipped_builds",
    "to_json",
    "with_bounds",
]
