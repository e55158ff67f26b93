"""Choosing the toolchain: the nvidia-cuda-nvcc wheel's, a split one (PTX from one nvcc,
cubins from another ptxas), what each records, and which take advanced controls.

The toolchains here are stand-ins: shell scripts that answer ``--version`` and
``-dryrun`` as nvcc and ptxas do. tests/compile/test_split_toolchain_nvcc.py builds
through the real ones.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import sys
import time
from pathlib import Path

import pytest

from ctune import identity_probe
from ctune.compile import toolchain
from ctune.compile.find_toolchains import toolchain_places, wheel_nvccs
from ctune.compile.select_toolchain import nvcc_for, resolve_nvcc
from ctune.compile.split_toolchain import LOCK_NAME, split_profile, split_toolchain
from ctune.compile.toolchain import (
    SPLIT_MARKER,
    Toolchain,
    find_nvcc,
    forget_probes,
    probe_toolchain,
)
from ctune.config import resolve
from ctune.errors import ToolchainError, UserError

#: a stand-in nvcc: its version, and, as ``nvcc -dryrun`` does, where it runs from and a
#: PATH that starts there (a real nvcc.profile's ``PATH += $(_HERE_)``)
STANDIN_NVCC = """#!/bin/sh
here=$(cd "$(dirname "$0")" && pwd)
case "$1" in
  --version) echo "Cuda compilation tools, release {short}, V{version}" ;;
  --help) echo "stand-in nvcc" ;;
  -dryrun) echo "#\\$ _HERE_=$here" >&2; echo "#\\$ PATH=$here:$PATH" >&2 ;;
esac
"""
STANDIN_PTXAS = """#!/bin/sh
echo "Cuda compilation tools, release {short}, V{version}"
"""
PROFILE = """
TOP              = $(_HERE_)/..

CICC_PATH        = $(TOP)/nvvm/bin
PATH            += $(CICC_PATH):$(_HERE_):
INCLUDES        +=  "-I$(TOP)/include" $(_SPACE_)
"""


def _script(path: Path, text: str, version: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    short = ".".join(version.split(".")[:2])
    path.write_text(text.format(short=short, version=version))
    path.chmod(0o755)
    return path


def standin_cuda(root: Path, version: str = "13.0.88") -> Path:
    """A CUDA root whose bin folder holds stand-in nvcc and ptxas, a profile and tools."""
    bin_dir = root / "bin"
    _script(bin_dir / "nvcc", STANDIN_NVCC, version)
    _script(bin_dir / "ptxas", STANDIN_PTXAS, version)
    (bin_dir / "nvcc.profile").write_text(PROFILE)
    for tool in ("cudafe++", "fatbinary", "nvlink", "bin2c"):
        _script(bin_dir / tool, "#!/bin/sh\n", version)
    (bin_dir / "crt").mkdir()
    return bin_dir / "nvcc"


def standin_ptxas(path: Path, version: str = "13.3.73") -> Path:
    return _script(path, STANDIN_PTXAS, version)


def standin_wheel(site: Path, version: str = "13.3.73") -> Path:
    """A site-packages folder with an installed nvidia-cuda-nvcc (metadata and nvcc)."""
    info = site / f"nvidia_cuda_nvcc-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: nvidia-cuda-nvcc\nVersion: {version}\n"
    )
    nvcc = standin_cuda(site / "nvidia" / "cu13", version)
    return nvcc


@pytest.fixture(autouse=True)
def _fresh_probes():
    forget_probes()
    yield
    forget_probes()


# --- probing --------------------------------------------------------------------------------


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat_line = Path(f"/proc/{pid}/stat")
    return stat_line.exists() and stat_line.read_text().rsplit(")", 1)[1].split()[0] != "Z"


def test_a_hung_nvcc_costs_one_probe_timeout_and_leaves_nothing_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stand-in nvcc that never answers: its probe is killed whole at the probe timeout,
    and every later probe of it (nvcc_home's dryrun, probing again) fails at once."""
    monkeypatch.setattr(toolchain, "PROBE_TIMEOUT_S", 1.0)
    hang = tmp_path / "hang"
    hang.write_text(f"#!/bin/sh\nsleep 600 & echo $! > {tmp_path}/child\nwait\n")
    hang.chmod(0o755)
    with pytest.raises(ToolchainError, match=r"--version did not answer within 1 s; check"):
        probe_toolchain(str(hang))
    time.sleep(0.1)
    assert not _alive(int((tmp_path / "child").read_text()))
    start = time.monotonic()
    with pytest.raises(ToolchainError, match="did not answer"):
        probe_toolchain(str(hang))
    assert toolchain.nvcc_home(str(hang)) == tmp_path
    assert time.monotonic() - start < 0.5


def test_an_nvcc_that_prints_without_end_is_read_only_up_to_the_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(toolchain, "PROBE_OUTPUT_BYTES", 64 * 1024)
    chatty = tmp_path / "chatty"
    chatty.write_text("#!/bin/sh\nexec yes 'Cuda compilation tools, release 13.0, V13.0.88'\n")
    chatty.chmod(0o755)
    with pytest.raises(ToolchainError, match=r"--version printed more than 64 KiB: not a CUDA"):
        probe_toolchain(str(chatty))


def test_the_ptxas_probed_is_the_one_the_nvcc_behind_a_wrapper_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wrapper script's folder has no ptxas: the one probed is that of the nvcc it runs
    (its dryrun's PATH), not a newer one first on ctune's PATH."""
    nvcc = standin_cuda(tmp_path / "cuda-13.0", "13.0.88")
    newer = standin_ptxas(tmp_path / "newer" / "ptxas", "13.3.73")
    monkeypatch.setenv("PATH", f"{newer.parent}:{os.environ['PATH']}")
    wrapper = tmp_path / "wrap" / "nvcc"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nexec {nvcc} "$@"\n')
    wrapper.chmod(0o755)
    tc = probe_toolchain(str(wrapper))
    assert (tc.describe(), tc.ptxas) == ("nvcc 13.0.88 / ptxas 13.0.88", str(nvcc.parent / "ptxas"))


def test_an_nvcc_that_runs_no_ptxas_is_refused_whatever_is_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    newer = standin_ptxas(tmp_path / "newer" / "ptxas", "13.3.73")
    monkeypatch.setenv("PATH", f"{newer.parent}:{os.environ['PATH']}")
    alone = _script(tmp_path / "alone" / "nvcc", STANDIN_PTXAS, "13.0.88")  # no dryrun answer
    with pytest.raises(ToolchainError, match=r"runs no ptxas: none in .*/alone, where it runs"):
        probe_toolchain(str(alone))


def test_a_ptxas_whose_version_cannot_be_read_is_refused_as_an_nvcc_is(tmp_path: Path) -> None:
    """A stand-in ptxas answering "hello world": no build could be fingerprinted with it."""
    nvcc = standin_cuda(tmp_path / "cuda", "13.0.88")
    garbage = tmp_path / "garbage"
    garbage.write_text("#!/bin/sh\necho hello world\n")
    garbage.chmod(0o755)
    split = split_toolchain(str(nvcc), garbage, tmp_path / "tc")
    with pytest.raises(ToolchainError) as err:
        probe_toolchain(str(split))
    assert str(err.value) == (
        f"cannot read the ptxas version of {garbage} from: hello world; give another with --ptxas"
    )
    (nvcc.parent / "nvcc").write_text("#!/bin/sh\necho hello world\n")
    forget_probes()  # the stand-in changed in place: its earlier answers are kept per process
    with pytest.raises(ToolchainError, match=r"^cannot read the nvcc version of .*: hello world"):
        probe_toolchain(str(nvcc))


def test_an_nvcc_path_that_is_no_program_is_named_as_such(tmp_path: Path) -> None:
    """As a ptxas setting is: a folder, a file that is not executable, a missing path."""
    plain = tmp_path / "nvcc.txt"
    plain.write_text("not a program")
    fix = "; install the CUDA toolkit, or choose one with --nvcc, CTUNE_NVCC or [tool.ctune] nvcc"
    for path, problem in (
        (tmp_path, "a directory"),
        (plain, "not executable (chmod +x it)"),
        (tmp_path / "none" / "nvcc", "no such file"),
    ):
        with pytest.raises(ToolchainError) as err:
            find_nvcc(str(path))
        assert str(err.value) == f"nvcc {path}: {problem}{fix}"
    with pytest.raises(ToolchainError, match=r"^nvcc not found \('no-such-nvcc' is not on PATH\)"):
        find_nvcc("no-such-nvcc")


# --- the wheel ------------------------------------------------------------------------------


def test_the_wheel_is_found_through_its_metadata(tmp_path: Path) -> None:
    nvcc = standin_wheel(tmp_path / "site")
    (tmp_path / "empty").mkdir()
    assert wheel_nvccs([str(tmp_path / "site")], own=[]) == [nvcc]
    assert wheel_nvccs([str(tmp_path / "empty")], own=[]) == []


def test_the_running_interpreters_own_wheel_comes_first(tmp_path: Path) -> None:
    other = standin_wheel(tmp_path / "other")
    own = standin_wheel(tmp_path / "own")
    path = [str(tmp_path / "other"), str(tmp_path / "own")]
    assert wheel_nvccs(path, own=[tmp_path / "own"]) == [own, other]
    assert wheel_nvccs(path, own=[tmp_path / "elsewhere"]) == [other, own]


def test_nvcc_wheel_selects_the_wheels_nvcc(tmp_path: Path, monkeypatch) -> None:
    nvcc = standin_wheel(tmp_path / "site")
    # without the interpreter's own site-packages, where ctune's dev extra installs the
    # real wheel (it would come first)
    others = [p for p in sys.path if "site-packages" not in p]
    monkeypatch.setattr(sys, "path", [str(tmp_path / "site"), *others])
    assert resolve_nvcc("wheel") == str(nvcc)
    tc = probe_toolchain(resolve_nvcc("wheel"))
    assert (tc.nvcc_version, tc.ptxas_version, tc.split) == ("13.3.73", "13.3.73", False)
    assert tc.ptxas == str(nvcc.parent / "ptxas")
    assert resolve_nvcc("/opt/cuda/bin/nvcc") == "/opt/cuda/bin/nvcc"


def test_nvcc_wheel_without_the_wheel_says_how_to_install_it(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "empty").mkdir()
    monkeypatch.setattr(sys, "path", [str(tmp_path / "empty")])
    with pytest.raises(ToolchainError) as err:
        resolve_nvcc("wheel")
    assert "pip install 'ctune[cuda13.3]'" in str(err.value) and "\n" not in str(err.value)


# --- the split toolchain --------------------------------------------------------------------


def _made(root: Path) -> list[str]:
    """What is under a toolchains folder but its lock: split folders, or scratch left."""
    return sorted(p.name for p in root.iterdir() if p.name != LOCK_NAME)


def test_the_split_folder_copies_nvcc_links_its_tools_and_takes_the_given_ptxas(
    tmp_path: Path,
) -> None:
    nvcc = standin_cuda(tmp_path / "cuda")
    ptxas = standin_ptxas(tmp_path / "new" / "ptxas")
    made = split_toolchain(str(nvcc), ptxas, tmp_path / "cache" / "toolchains")
    bin_dir = made.parent
    assert made.name == "nvcc" and not made.is_symlink()  # nvcc takes _HERE_ from itself
    assert made.read_bytes() == nvcc.read_bytes() and os.access(made, os.X_OK)
    assert (bin_dir / "ptxas").resolve() == ptxas
    for tool in ("cudafe++", "fatbinary", "nvlink", "bin2c", "crt"):
        assert (bin_dir / tool).resolve() == nvcc.parent / tool
    profile = (bin_dir / "nvcc.profile").read_text()
    assert f"TOP              = {nvcc.parent}/.." in profile  # the original CUDA root
    assert "PATH            += $(CICC_PATH):$(_HERE_):" in profile  # this folder first
    marker = json.loads((bin_dir / SPLIT_MARKER).read_text())
    assert marker == {"nvcc": str(nvcc), "cuda_bin": str(nvcc.parent), "ptxas": str(ptxas)}
    assert _made(tmp_path / "cache" / "toolchains") == [bin_dir.parent.name]  # no scratch left


def test_the_split_folder_is_made_once_per_nvcc_and_ptxas(tmp_path: Path) -> None:
    nvcc = standin_cuda(tmp_path / "cuda")
    ptxas = standin_ptxas(tmp_path / "new" / "ptxas")
    other = standin_ptxas(tmp_path / "other" / "ptxas")
    root = tmp_path / "toolchains"
    first = split_toolchain(str(nvcc), ptxas, root)
    stamp = first.stat().st_mtime_ns
    assert split_toolchain(str(nvcc), ptxas, root) == first
    assert first.stat().st_mtime_ns == stamp  # not made again
    assert split_toolchain(str(nvcc), other, root) != first
    assert len(_made(root)) == 2


def test_a_split_toolchain_says_so_in_its_description_and_fingerprint(tmp_path: Path) -> None:
    nvcc = standin_cuda(tmp_path / "cuda")
    ptxas = standin_ptxas(tmp_path / "new" / "ptxas")
    plain = probe_toolchain(str(nvcc))
    split = probe_toolchain(str(split_toolchain(str(nvcc), ptxas, tmp_path / "tc")))
    assert (plain.split, plain.describe()) == (False, "nvcc 13.0.88 / ptxas 13.0.88")
    assert plain.ptxas == str(nvcc.parent / "ptxas")
    assert split.split and split.ptxas == str(ptxas)
    assert split.describe() == "nvcc 13.0.88 / ptxas 13.3.73 (split)"
    fields = identity_probe.probe_toolchain(split.nvcc)
    assert fields["ptxas_version"] == "13.3.73 (split: PTX from nvcc 13.0.88)"
    assert identity_probe.probe_toolchain(str(nvcc))["ptxas_version"] == "13.0.88"  # as recorded


def test_the_ptxas_setting_selects_the_split_toolchain_under_the_cache(tmp_path: Path) -> None:
    nvcc = standin_cuda(tmp_path / "cuda")
    ptxas = standin_ptxas(tmp_path / "new" / "ptxas")
    cache = {"CTUNE_CACHE_DIR": str(tmp_path / "cache")}
    environ = {"CTUNE_NVCC": str(nvcc), "CTUNE_PTXAS": str(ptxas), **cache}
    chosen = Path(nvcc_for(resolve(environ=environ, cwd=tmp_path)))
    assert chosen.parent.parent.parent == tmp_path / "cache" / "toolchains"
    plain = resolve(environ={"CTUNE_NVCC": str(nvcc), **cache}, cwd=tmp_path)
    assert nvcc_for(plain) == str(nvcc)


def test_a_missing_given_ptxas_is_one_line(tmp_path: Path) -> None:
    nvcc = standin_cuda(tmp_path / "cuda")
    with pytest.raises(ToolchainError, match=r"^ptxas .*/nope: no such file; give the path"):
        split_toolchain(str(nvcc), tmp_path / "nope", tmp_path / "tc")


def test_a_profile_whose_path_skips_nvccs_folder_is_refused(tmp_path: Path) -> None:
    """A split that would still run the original ptxas would be a lie in the fingerprint."""
    nvcc = standin_cuda(tmp_path / "cuda")
    nvcc.write_text(
        nvcc.read_text().replace('echo "#\\$ PATH=$here:$PATH"', f'echo "#\\$ PATH={nvcc.parent}"')
    )
    ptxas = standin_ptxas(tmp_path / "new" / "ptxas")
    with pytest.raises(ToolchainError, match="would run the ptxas in"):
        split_toolchain(str(nvcc), ptxas, tmp_path / "tc")
    assert _made(tmp_path / "tc") == []  # nothing half made


def _lose_ptxas(bin_dir: Path) -> None:
    (bin_dir / "ptxas").unlink()


def _lose_marker(bin_dir: Path) -> None:
    (bin_dir / SPLIT_MARKER).unlink()


def _point_ptxas_elsewhere(bin_dir: Path) -> None:
    (bin_dir / "ptxas").unlink()
    (bin_dir / "ptxas").symlink_to(bin_dir.parent.parent.parent / "cuda" / "bin" / "ptxas")


def _lose_a_tool(bin_dir: Path) -> None:
    (bin_dir / "fatbinary").unlink()


def _empty_nvcc(bin_dir: Path) -> None:
    (bin_dir / "nvcc").write_bytes(b"")


@pytest.mark.parametrize(
    "damage", [_lose_ptxas, _lose_marker, _point_ptxas_elsewhere, _lose_a_tool, _empty_nvcc]
)
def test_a_damaged_split_folder_is_made_again(tmp_path: Path, damage, caplog) -> None:
    """A folder that lost its ptxas link would have nvcc run the first ptxas on PATH, and
    one that lost its marker could not be made again in place: each is remade, whole."""
    nvcc = standin_cuda(tmp_path / "cuda")
    ptxas = standin_ptxas(tmp_path / "new" / "ptxas")
    root = tmp_path / "cache" / "toolchains"
    made = split_toolchain(str(nvcc), ptxas, root)
    damage(made.parent)
    assert split_toolchain(str(nvcc), ptxas, root) == made
    assert "remaking the split toolchain in" in caplog.text
    assert (made.parent / "ptxas").resolve() == ptxas
    assert made.read_bytes() == nvcc.read_bytes()
    assert (made.parent / "fatbinary").resolve() == nvcc.parent / "fatbinary"
    assert json.loads((made.parent / SPLIT_MARKER).read_text())["ptxas"] == str(ptxas)
    assert probe_toolchain(str(made)).describe() == "nvcc 13.0.88 / ptxas 13.3.73 (split)"
    assert _made(root) == [made.parent.parent.name]  # nothing set aside is left


def test_a_ptxas_older_than_the_nvcc_is_refused_in_one_line(tmp_path: Path) -> None:
    """ptxas 13.0 cannot read the PTX of nvcc 13.3: every build would fail."""
    nvcc = standin_cuda(tmp_path / "cuda", "13.3.73")
    old = standin_ptxas(tmp_path / "old" / "ptxas", "13.0.88")
    root = tmp_path / "cache" / "toolchains"
    with pytest.raises(UserError) as err:
        split_toolchain(str(nvcc), old, root)
    assert str(err.value) == (
        f"ptxas {old}: release 13.0, older than nvcc 13.3 ({nvcc}), whose PTX it cannot "
        "read; give a ptxas 13.3 or later, or choose an nvcc 13.0 or older"
    )
    assert not root.exists()
    same = standin_ptxas(tmp_path / "same" / "ptxas", "13.3.10")  # the same release: taken
    assert split_toolchain(str(nvcc), same, root).is_file()


def test_a_cache_folder_that_cannot_be_written_is_one_line_with_the_fix(
    tmp_path: Path, monkeypatch
) -> None:
    """A read-only cache: exit 3, naming the folder and what to do (no OSError escapes)."""
    nvcc = standin_cuda(tmp_path / "cuda")
    ptxas = standin_ptxas(tmp_path / "new" / "ptxas")
    cache = tmp_path / "cache"
    read_only(monkeypatch, cache)
    with pytest.raises(ToolchainError) as err:
        split_toolchain(str(nvcc), ptxas, cache / "toolchains")
    assert str(err.value) == (
        f"cannot make the split toolchain in {cache / 'toolchains'}: Read-only file system; "
        f"make the cache folder {cache} writable, or set CTUNE_CACHE_DIR (or [tool.ctune] "
        "cache_dir) to a folder that is"
    )


def read_only(monkeypatch, folder: Path) -> None:
    """Make ``folder`` and what is under it refuse new folders as a read-only mount does
    (EROFS; a test running as root could write through a chmod)."""
    real_mkdir = Path.mkdir

    def mkdir(self: Path, *args, **kwargs) -> None:
        if self == folder or self.is_relative_to(folder):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self))
        real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", mkdir)


def test_the_profile_keeps_here_only_in_path() -> None:
    text = split_profile(PROFILE, Path("/opt/cuda-13.0/bin"))
    assert "TOP              = /opt/cuda-13.0/bin/.." in text
    assert "PATH            += $(CICC_PATH):$(_HERE_):" in text
    assert text.count("$(_HERE_)") == 1


# --- advanced controls ----------------------------------------------------------------------


def _toolchain(nvcc: str, ptxas: str) -> Toolchain:
    return Toolchain("/x/nvcc", nvcc, ptxas, f"release {nvcc}", "")


@pytest.mark.parametrize(
    ("nvcc", "ptxas", "compiler", "arch", "takes"),
    [
        ("13.0.88", "13.0.88", "ptxas", "sm_90a", False),
        ("13.0.88", "13.3.73", "ptxas", "sm_90a", True),  # the split path
        ("13.3.73", "13.3.73", "ptxas", "sm_90", True),
        ("13.5.37", "13.5.37", "ptxas", "sm_80", True),
        ("14.0.1", "14.0.1", "ptxas", "sm_90", True),
        ("13.0.88", "13.3.73", "nvcc", "sm_100", False),  # split: nvcc is 13.0
        ("13.3.73", "13.3.73", "nvcc", "sm_90a", False),  # nvcc refuses Hopper
        ("13.3.73", "13.3.73", "nvcc", "sm_90", False),
        ("13.3.73", "13.3.73", "nvcc", "sm_100", True),
        ("13.3.73", "13.3.73", "nvcc", "sm_100a", True),
        ("13.3.73", "13.3.73", "nvcc", "sm_120", True),
        ("12.10.1", "12.10.1", "ptxas", "sm_90", False),  # 12.10 is not 13.3
        ("unknown", "unknown", "ptxas", "sm_90", False),
    ],
)
def test_which_compiler_takes_advanced_controls(nvcc, ptxas, compiler, arch, takes) -> None:
    ok, why = _toolchain(nvcc, ptxas).takes_controls(compiler, arch)
    assert ok is takes
    assert bool(why) is not takes and "\n" not in why


def test_the_reasons_name_the_compiler_its_version_and_the_target() -> None:
    _, old = _toolchain("13.0.88", "13.0.88").takes_controls("ptxas", "sm_90a")
    assert old == "ptxas 13.0.88 takes no controls files (13.3 or later does)"
    _, hopper = _toolchain("13.3.73", "13.3.73").takes_controls("nvcc", "sm_90a")
    assert hopper == "nvcc 13.3.73 takes no controls file of its own for sm_90a (sm_100+)"
    with pytest.raises(ValueError, match="not one of ptxas, nvcc"):
        _toolchain("13.3.73", "13.3.73").takes_controls("cicc", "sm_90")


# --- settings ---------------------------------------------------------------------------------


def test_ptxas_settings_are_checked_where_they_are_read(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "ptxas"
    with pytest.raises(UserError) as err:
        resolve({"ptxas": str(missing)}, environ={}, cwd=tmp_path)
    assert str(err.value).startswith(f"--ptxas={missing}: no such file; expected the path of")
    plain = tmp_path / "ptxas.txt"
    plain.write_text("not a program")
    plain.chmod(stat.S_IRUSR | stat.S_IWUSR)
    with pytest.raises(UserError) as err:
        resolve(environ={"CTUNE_PTXAS": str(plain)}, cwd=tmp_path)
    assert str(err.value).startswith(f"CTUNE_PTXAS={plain}: not executable (chmod +x it)")
    with pytest.raises(UserError, match=r"--ptxas=.*: a directory; expected"):
        resolve({"ptxas": str(tmp_path)}, environ={}, cwd=tmp_path)
    assert "\n" not in str(err.value)


def test_a_ptxas_in_the_settings_file_is_taken_from_its_folder(tmp_path: Path) -> None:
    standin_ptxas(tmp_path / "tools" / "ptxas")
    (tmp_path / "pyproject.toml").write_text('[tool.ctune]\nptxas = "tools/ptxas"\n')
    (tmp_path / "sub").mkdir()
    settings = resolve(environ={}, cwd=tmp_path / "sub")
    assert settings.ptxas == str(tmp_path / "tools" / "ptxas")
    assert resolve(environ={}, cwd=tmp_path.parent).ptxas == ""  # nvcc's own by default


def test_an_nvcc_path_in_the_settings_file_is_taken_from_its_folder(tmp_path: Path) -> None:
    """``nvcc = "tc/nvcc"`` means the same from any subfolder; a bare name is PATH's."""
    nvcc = standin_cuda(tmp_path / "tc", "13.0.88")
    (tmp_path / "pyproject.toml").write_text('[tool.ctune]\nnvcc = "tc/bin/nvcc"\n')
    (tmp_path / "sub").mkdir()
    settings = resolve(environ={}, cwd=tmp_path / "sub")
    assert settings.nvcc == str(nvcc)
    assert probe_toolchain(nvcc_for(settings)).nvcc == str(nvcc)
    for bare in ("nvcc", "wheel", "nvcc-13.0"):
        (tmp_path / "pyproject.toml").write_text(f'[tool.ctune]\nnvcc = "{bare}"\n')
        assert resolve(environ={}, cwd=tmp_path / "sub").nvcc == bare


def test_nvcc_wheel_is_a_setting_value(tmp_path: Path) -> None:
    assert resolve({"nvcc": "wheel"}, environ={}, cwd=tmp_path).nvcc == "wheel"


# --- discovery --------------------------------------------------------------------------------


def test_toolchains_are_found_on_path_in_cuda_home_and_as_a_wheel(
    tmp_path: Path, monkeypatch
) -> None:
    on_path = standin_cuda(tmp_path / "onpath", "13.0.88")
    home = standin_cuda(tmp_path / "home", "13.1.1")
    wheel = standin_wheel(tmp_path / "site")
    monkeypatch.setattr(sys, "path", [str(tmp_path / "site"), *sys.path])
    places = toolchain_places({"PATH": str(on_path.parent), "CUDA_HOME": str(home.parent.parent)})
    found = dict(places)
    assert found["PATH"] == str(on_path)
    assert found["CUDA_HOME"] == str(home)
    assert found["nvidia-cuda-nvcc wheel"] == str(wheel)
    assert "CUDA_PATH" not in found
