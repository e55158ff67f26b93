"""compile.relink's pure parts: which argv items are ptxas-only, reading nvcc's --dryrun,
the fatbin split, a kept front end read back, and the argv rule on every step it runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctune.compile.relink import (
    DLINK_OBJECT,
    HOST_OBJECT,
    PTX,
    RECORD,
    FrontEnd,
    RelinkError,
    Runner,
    fatbin_object_source,
    has_ptxas_variants,
    host_side,
    kind_of,
    load_frontend,
    parse_cubin_dryrun,
    parse_dryrun,
    split_fatbin,
)
from ctune.quoting import CommandLineError
from ctune.spec.space.nvcc import CATALOGUE, acf_gene

#: the lines of a launcher build's ``nvcc --dryrun --keep --keep-dir keep`` that matter
DRYRUN = """\
#$ _HERE_=/cuda/bin
#$ PATH=/cuda/nvvm/bin:/cuda/bin:/usr/bin
#$ INCLUDES="-I/cuda/include"
#$ gcc -std=c++17 -E -x c++ -D__CUDACC__ "/src/scale.cu" -o "keep/scale.cpp4.ii"
#$ "$CICC_PATH/cicc" --c++17 -arch compute_90a "keep/scale.cpp1.ii" -o "keep/scale.ptx"
#$ ptxas -arch=sm_90a -m64 -v -O1  "keep/scale.ptx"  -o "keep/scale.cubin"
#$ fatbinary --create="keep/scale.fatbin" -64 --cmdline="-v -O1 " \
"--image3=kind=elf,sm=90a,file=keep/scale.cubin" --embedded-fatbin="keep/scale.fatbin.c"
#$ gcc -std=c++17 -c -x c++ -fPIC "-I/cuda/include" -m64 "keep/scale.cudafe1.cpp" -o "keep/scale.o"
#$ nvlink -m64 --shared --arch=sm_90a "keep/scale.o" -o "keep/kernel_dlink.cubin"
#$ fatbinary --create="keep/kernel_dlink.fatbin" -64 -link \
"--image3=kind=elf,sm=90a,file=keep/kernel_dlink.cubin"
#$ g++ -fPIC -m64 -Wl,--start-group "keep/kernel_dlink.o" "keep/scale.o" -shared -lcudart_static \
-Wl,--end-group -o "kernel.so"
""".replace("\\\n", "")

FATBIN_C = (
    '#include "fatbinary_section.h"\n'
    'asm(\n".section .nv_fatbin, \\"a\\"\\n"\n".align 8\\n"\n"fatbinData:\\n"\n'
    '".quad 0x1\\n"\n".text\\n");\nextern const unsigned long long fatbinData[1];\n'
)


def test_the_dryrun_gives_each_step_as_an_argv_list() -> None:
    steps = parse_dryrun(DRYRUN, "keep")
    assert steps.stem == "scale"
    assert steps.search_path == "/cuda/nvvm/bin:/cuda/bin:/usr/bin"
    assert steps.ptxas == [
        "ptxas", "-arch=sm_90a", "-m64", "-v", "-O1", "keep/scale.ptx", "-o", "keep/scale.cubin"
    ]  # fmt: skip
    assert steps.fatbinary[-1] == "--embedded-fatbin=keep/scale.fatbin.c"
    assert steps.host_compile[-3:] == ["keep/scale.cudafe1.cpp", "-o", "keep/scale.o"]
    assert steps.link[0] == "g++" and steps.link[-1] == "kernel.so"


#: a kernel's ``nvcc -cubin ... --dryrun --keep --keep-dir v``: ptxas writes the cubin
CUBIN_DRYRUN = """\
#$ PATH=/cuda/nvvm/bin:/split/bin:/usr/bin
#$ gcc -std=c++17 -E -x c++ -D__CUDACC__ "/src/scale.cu" -o "v/scale.cpp1.ii"
#$ "$CICC_PATH/cicc" --c++17 -arch compute_90a "v/scale.cpp1.ii" -o "v/scale.ptx"
#$ ptxas -arch=sm_90a -m64 -v -O2  "v/scale.ptx"  -o "k.cubin"
"""


def test_a_cubin_dryrun_gives_its_ptxas_step_which_writes_the_cubin() -> None:
    path, ptxas, stem = parse_cubin_dryrun(CUBIN_DRYRUN, "v")
    assert (path, stem) == ("/cuda/nvvm/bin:/split/bin:/usr/bin", "scale")
    assert ptxas == ["ptxas", "-arch=sm_90a", "-m64", "-v", "-O2", "v/scale.ptx", "-o", "k.cubin"]
    with pytest.raises(RelinkError, match="no kept PTX"):
        parse_cubin_dryrun(CUBIN_DRYRUN, "keep")
    assert kind_of(["nvcc", "-cubin", "-o", "k.cubin"]) == "cubin"
    assert kind_of(["nvcc", "-shared", "-o", "k.so"]) == "launcher"


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda t: t.replace("#$ ptxas", "#$ true"), "0 ptxas steps"),
        (lambda t: t + '#$ ptxas -arch=sm_80 "keep/scale.ptx" -o "keep/b.cubin"\n', "2 ptxas"),
        (lambda t: t[: t.index("#$ g++")], "0 link steps"),
        (lambda t: t.replace('"keep/scale.ptx"  -o', '"other/scale.ptx" -o'), "no kept PTX"),
        (lambda t: t + '#$ gcc "unclosed\n', "cannot read nvcc's step"),
    ],
)
def test_a_dryrun_it_does_not_know_is_refused(change, why: str) -> None:
    with pytest.raises(RelinkError, match=why):
        parse_dryrun(change(DRYRUN), "keep")


def test_the_fatbin_is_split_between_the_host_object_and_its_own() -> None:
    block, rest = split_fatbin(FATBIN_C)
    assert "fatbinData:" in block and "asm(" not in rest
    assert '__attribute__((visibility("hidden"))) extern' in host_side(rest)
    source = fatbin_object_source(block)
    assert source.index(".globl fatbinData") < source.index(".hidden fatbinData")
    assert source.index(".hidden fatbinData") < source.index('"fatbinData:')
    for broken in (lambda: split_fatbin("int x;"), lambda: host_side("int x;")):
        with pytest.raises(RelinkError):
            broken()
    with pytest.raises(RelinkError, match="no fatbinData label"):
        fatbin_object_source('asm(".text\\n");')


def test_only_a_space_with_ptxas_options_keeps_front_ends() -> None:
    assert has_ptxas_variants([CATALOGUE["ptxas_opt"].gene])
    assert has_ptxas_variants([CATALOGUE["fast_math"].gene, acf_gene("ptxas")])
    assert not has_ptxas_variants([CATALOGUE["fast_math"].gene, CATALOGUE["maxrregcount"].gene])
    assert not has_ptxas_variants([acf_gene("nvcc")])  # nvcc's file changes the front end


def _front(folder: Path) -> Path:
    folder.mkdir()
    for name in (PTX, HOST_OBJECT, DLINK_OBJECT):
        (folder / name).write_bytes(b"x")
    record = {
        "format": 1,
        "stem": "scale",
        "link": ["g++", "{dlink}", "{host}", "-shared", "-o", "{output}"],
        "path": "/usr/bin",
        "host_compiler": "/usr/bin/gcc",
    }
    (folder / RECORD).write_text(json.dumps(record))
    return folder


def test_a_kept_front_end_reads_back_and_gives_its_link_step(tmp_path: Path) -> None:
    assert load_frontend(tmp_path / "none") is None
    front = load_frontend(_front(tmp_path / "k"))
    assert isinstance(front, FrontEnd) and front.stem == "scale"
    link = front.link_argv(tmp_path / "v" / "fatbin.o", "kernel.so")
    k = tmp_path / "k"
    assert link == [
        "g++", str(k / DLINK_OBJECT), str(k / HOST_OBJECT), str(tmp_path / "v" / "fatbin.o"),
        "-shared", "-o", "kernel.so",
    ]  # fmt: skip


def test_a_cubin_front_end_is_its_ptx_alone(tmp_path: Path) -> None:
    folder = tmp_path / "c"
    folder.mkdir()
    (folder / PTX).write_text("// ptx\n")
    record = {"format": 1, "kind": "cubin", "stem": "scale", "link": [], "path": "/cuda/bin"}
    (folder / RECORD).write_text(json.dumps({**record, "host_compiler": ""}))
    front = load_frontend(folder)
    assert front is not None and front.kind == "cubin" and front.link == []
    (folder / PTX).unlink()
    with pytest.raises(RelinkError, match=r"lost its kernel\.ptx"):
        load_frontend(folder)
    (folder / PTX).write_text("// ptx\n")
    (folder / RECORD).write_text(json.dumps({**record, "kind": "other", "host_compiler": ""}))
    with pytest.raises(RelinkError, match="of kind 'other'"):
        load_frontend(folder)


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda f: (f / PTX).unlink(), "lost its kernel.ptx"),
        (lambda f: (f / HOST_OBJECT).unlink(), "lost its host.o"),
        (lambda f: (f / RECORD).write_text("{"), "unreadable front-end record"),
        (lambda f: (f / RECORD).unlink(), "unreadable front-end record"),
        (lambda f: (f / RECORD).write_text('{"format": 99}'), "format 99"),
    ],
)
def test_a_damaged_front_end_is_refused(tmp_path: Path, damage, why: str) -> None:
    folder = _front(tmp_path / "k")
    damage(folder)
    with pytest.raises(RelinkError, match=why):
        load_frontend(folder)


def test_a_step_the_argv_rule_refuses_is_never_run(tmp_path: Path) -> None:
    """The steps come from nvcc's listing and a kept record: each is checked as nvcc's own
    argv is, before it runs (a gene value's ``$(...)`` never reaches a program)."""
    marker = tmp_path / "ran"
    program = tmp_path / "tool"
    program.write_text(f"#!/bin/sh\ntouch {marker}\n")
    program.chmod(0o755)
    runner = Runner("test", 10.0, tmp_path / "scratch")
    with pytest.raises(CommandLineError, match="nothing was run"):
        runner.must([str(program), "-Wl,$(touch pwned)"], tmp_path, "the link step")
    assert not marker.exists() and not (tmp_path / "pwned").exists()
    assert runner.must([str(program), "-c"], tmp_path, "the link step") == ""
    assert marker.exists()
    program.write_text("#!/bin/sh\necho 'boom: it broke' >&2\nexit 3\n")
    with pytest.raises(RelinkError, match=r"the link step failed \(exit 3\): boom: it broke"):
        runner.must([str(program)], tmp_path, "the link step")
