"""compile.resources: recorded ptxas -v outputs -> Resources."""

from pathlib import Path

from ctune.compile.nvcc import classify_failure
from ctune.compile.resources import entry_resources, parse_ptxas_report
from ctune.records import Outcome, Resources

DATA = Path(__file__).parents[2] / "data" / "ptxas"


def test_single_entry():
    res = entry_resources((DATA / "gemm_sm90.txt").read_text(), "ctune_gemm")
    assert res == Resources(
        regs=168,
        spills_store_bytes=0,
        spills_load_bytes=0,
        smem_bytes=73728,
        stack_bytes=0,
        cmem_bytes=None,
    )
    assert res.spills_bytes == 0


def test_picks_the_entry_among_several_and_reads_spills():
    text = (DATA / "spills_two_kernels.txt").read_text()
    report = parse_ptxas_report(text)
    assert set(report) == {"_Z6helperPf", "ctune_gemm"}
    res = entry_resources(text, "ctune_gemm")
    assert (res.regs, res.spills_bytes, res.smem_bytes, res.stack_bytes, res.cmem_bytes) == (
        32,
        208,
        16384,
        96,
        400,
    )


def test_unknown_symbol_falls_back_to_heaviest_kernel():
    text = (DATA / "spills_two_kernels.txt").read_text()
    assert entry_resources(text, "mangled_cutlass_kernel").regs == 32
    assert entry_resources("", "x") == Resources()


def test_failure_classification():
    assert (
        classify_failure(
            1,
            "ptxas error   : Entry function 'k' uses too much shared data "
            "(0x30000 bytes, 0xc000 max)",
        )
        is Outcome.RESOURCE_LIMIT
    )
    assert classify_failure(1, 'error: identifier "x" is undefined') is Outcome.COMPILE_ERROR
    assert classify_failure(-11, "") is Outcome.COMPILER_CRASH
    assert (
        classify_failure(
            1,
            "nvcc error : 'cicc' died due to signal 11 (Invalid memory "
            "reference)\ninternal compiler error",
        )
        is Outcome.COMPILER_CRASH
    )
    assert (
        classify_failure(1, "terminate called after throwing an instance of 'std::bad_alloc'")
        is Outcome.BUILD_OOM
    )


def _report(*kernels: tuple[str, int]) -> str:
    """A ptxas -v report of kernels (mangled name, registers)."""
    return "".join(
        f"ptxas info    : Compiling entry function '{name}' for 'sm_90a'\n"
        f"ptxas info    : Function properties for {name}\n"
        "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        f"ptxas info    : Used {regs} registers, used 1 barriers\n"
        for name, regs in kernels
    )


def test_a_launcher_counts_its_library_s_kernels_beside_the_ones_it_launches():
    # attention.cu's shape: it launches its own small merge kernel by name, and CUTLASS's
    # attention kernel through CUTLASS's code
    text = _report(
        ("_ZN15ctune_attention12merge_splitsEPK6__halfPKfPS1_ii", 34),
        ("_ZN7cutlass13device_kernelINS_4fmha6kernel4FmhaEEEvNT_6ParamsE", 168),
        ("_ZN15ctune_attention6unusedEPf", 255),  # its own, never launched: left out
    )
    own = {"merge_splits", "unused"}
    assert entry_resources(text, "ctune_attention", {"merge_splits"}, own).regs == 168
    assert entry_resources(text, "ctune_attention", {"merge_splits"}).regs == 34  # no library
    assert entry_resources(text, "ctune_attention").regs == 255  # nothing known: heaviest
