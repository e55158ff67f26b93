"""Settings resolution: precedence, and paths taken from the pyproject.toml that names them."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from ctune.config import debug_enabled, resolve
from ctune.errors import UserError


def _project(tmp_path: Path, table: str) -> Path:
    (tmp_path / "pyproject.toml").write_text(f"[tool.ctune]\n{table}\n")
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    return deep


def test_relative_paths_resolve_against_the_pyproject_folder(tmp_path: Path) -> None:
    deep = _project(tmp_path, 'registry = "reg"\ncache_dir = ".cache/ctune"')
    for cwd in (tmp_path, deep):
        got = resolve(environ={}, cwd=cwd)
        assert got.registry == tmp_path / "reg"
        assert got.cache_dir == tmp_path / ".cache" / "ctune"


def test_absolute_paths_and_other_layers_are_kept(tmp_path: Path) -> None:
    deep = _project(tmp_path, f'registry = "{tmp_path / "abs"}"\nwarmup_ms = 5')
    got = resolve(environ={}, cwd=deep)
    assert got.registry == tmp_path / "abs" and got.warmup_ms == 5.0
    # the environment and the command line still win, as given (relative to the cwd)
    env = resolve(environ={"CTUNE_REGISTRY": "from-env"}, cwd=deep)
    assert env.registry == Path("from-env")
    cli = resolve({"registry": "from-cli"}, environ={"CTUNE_REGISTRY": "x"}, cwd=deep)
    assert cli.registry == Path("from-cli")


def test_a_bad_value_names_its_layer(tmp_path: Path) -> None:
    deep = _project(tmp_path, 'jobs = "many"')
    with pytest.raises(UserError, match=r"\[tool.ctune\] jobs='many': expected an integer"):
        resolve(environ={}, cwd=deep)


def test_a_bad_relative_path_in_the_file_is_named_as_written(tmp_path: Path) -> None:
    """Checked where it points (the file's folder), shown as the user wrote it."""
    deep = _project(tmp_path, 'ptxas = "nope/ptxas"')
    with pytest.raises(UserError) as err:
        resolve(environ={}, cwd=deep)
    where = f"{tmp_path / 'pyproject.toml'} [tool.ctune] ptxas"
    assert str(err.value).startswith(f"{where}='nope/ptxas': no such file; expected the path")


# --- every setting parsed and range-checked where it is read -------------------------------

#: (setting, bad value, what the message says is expected)
BAD_SETTINGS = [
    ("jobs", "lots", "an integer from 0 (one per CPU core) to 1024"),
    ("jobs", "-1", "an integer from 0 (one per CPU core) to 1024"),
    ("jobs", "8.5", "an integer from 0"),
    ("compile_timeout_s", "nan", "a finite number of seconds > 0 and at most 604800"),
    ("compile_timeout_s", "inf", "a finite number of seconds > 0"),
    ("compile_timeout_s", "0", "a finite number of seconds > 0"),
    ("compile_timeout_s", "1e400", "a finite number of seconds > 0"),
    ("compile_memory_bytes", "-1", "an integer number of bytes from 0 (no limit) to 2**62"),
    ("rep_ms", "inf", "a finite number of milliseconds > 0 and at most 3600000"),
    ("rep_ms", "-inf", "a finite number of milliseconds > 0"),
    ("rep_ms", "0", "a finite number of milliseconds > 0"),
    ("warmup_ms", "-5", "a finite number of milliseconds >= 0 and at most 3600000"),
    ("warmup_ms", "nan", "a finite number of milliseconds >= 0"),
    ("energy_window_s", "nan", "a finite number of seconds > 0 and at most 3600"),
    ("energy_window_s", "-1", "a finite number of seconds > 0"),
    ("run_timeout_floor_s", "0", "a finite number of seconds > 0 and at most 604800"),
    ("registry", "", "a folder (empty would be the current folder)"),
    ("registry", "  ", "a folder (empty would be the current folder)"),
    ("cache_dir", "", "a folder (empty would be the current folder)"),
    ("nvcc", "", "the nvcc to run: a name on PATH, a path, or wheel"),
    ("registry_remote", "", "a git remote name such as origin"),
    ("debug", "maybe", "on or off: 1/0, true/false, yes/no, on/off"),
    ("relink", "sometimes", "auto, on or off (on and off also as 1/0, true/false, yes/no)"),
    ("executor", "tcp://a..b:8786", "local, dask, auto or a Dask scheduler address"),
    ("executor", "host:99999", "local, dask, auto or a Dask scheduler address"),
    ("executor", "[::1:8786", "local, dask, auto or a Dask scheduler address"),
    ("executor", "", "local, dask, auto or a Dask scheduler address"),
    ("gpus", "0,x", "all, or GPU indices such as 0,1 (empty: GPU 0)"),
    ("arch", "foo", "an architecture like sm_90 or sm_90a, or empty for the spec's"),
    ("timing", "bursts", "one of auto, events, graph, or empty for the spec's"),
    ("l2_policy", "warm", "one of cold, hot, or empty for the spec's"),
]


def _shown(value: str) -> str:
    return value if value.strip() else repr(value)


@pytest.mark.parametrize(("name", "value", "expected"), BAD_SETTINGS)
def test_a_bad_variable_is_named_in_one_line(tmp_path: Path, name, value, expected) -> None:
    variable = f"CTUNE_{name.upper()}"
    with pytest.raises(UserError) as err:
        resolve(environ={variable: value}, cwd=tmp_path)
    assert str(err.value).startswith(f"{variable}={_shown(value)}: expected {expected}")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(("name", "value", "expected"), BAD_SETTINGS)
def test_a_bad_file_key_is_named_in_one_line(tmp_path: Path, name, value, expected) -> None:
    (tmp_path / "pyproject.toml").write_text(f'[tool.ctune]\n{name} = "{value}"\n')
    with pytest.raises(UserError) as err:
        resolve(environ={}, cwd=tmp_path)
    where = f"{tmp_path / 'pyproject.toml'} [tool.ctune] {name}"
    assert str(err.value).startswith(f"{where}={value!r}: expected {expected}")


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("rep_ms", float("nan"), "--rep-ms=nan: expected a finite number of milliseconds > 0"),
        ("energy_window_s", 0.0, "--energy-window=0.0: expected a finite number of seconds > 0"),
        ("jobs", -2, "--jobs=-2: expected an integer from 0"),
        ("registry_remote", " ", "--remote=' ': expected a git remote name"),
        ("relink", "maybe", "--relink=maybe: expected auto, on or off"),
    ],
)
def test_a_bad_option_is_named_as_spelled(tmp_path: Path, option, value, message) -> None:
    with pytest.raises(UserError) as err:
        resolve({option: value}, environ={}, cwd=tmp_path)
    assert str(err.value).startswith(message)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("jobs = true", "jobs=True: expected an integer"),
        ("jobs = 8.5", "jobs=8.5: expected an integer"),
        ("rep_ms = nan", "rep_ms=nan: expected a finite number"),
        ("rep_ms = inf", "rep_ms=inf: expected a finite number"),
        ("nvcc = 5", "nvcc=5: expected the nvcc to run"),
        ('registry = ""', "registry='': expected a folder"),
    ],
)
def test_toml_values_of_the_wrong_kind_are_refused(tmp_path: Path, table, message) -> None:
    (tmp_path / "pyproject.toml").write_text(f"[tool.ctune]\n{table}\n")
    with pytest.raises(UserError, match=re.escape(message)):
        resolve(environ={}, cwd=tmp_path)


@pytest.mark.parametrize(
    ("name", "value", "field", "parsed"),
    [
        ("CTUNE_JOBS", "0", "jobs", 0),
        ("CTUNE_JOBS", "1024", "jobs", 1024),
        ("CTUNE_WARMUP_MS", "0", "warmup_ms", 0.0),
        ("CTUNE_REP_MS", "0.5", "rep_ms", 0.5),
        ("CTUNE_COMPILE_MEMORY_BYTES", "0", "compile_memory_bytes", 0),
        (
            "CTUNE_EXECUTOR",
            "tcp://sched.example.com:8786",
            "executor",
            "tcp://sched.example.com:8786",
        ),
        ("CTUNE_EXECUTOR", "[::1]:8786", "executor", "[::1]:8786"),
        ("CTUNE_EXECUTOR", "AUTO", "executor", "AUTO"),
        ("CTUNE_GPUS", "", "gpus", ""),
        ("CTUNE_ARCH", "", "arch", ""),
        ("CTUNE_REGISTRY", "reg", "registry", Path("reg")),
        ("CTUNE_RELINK", "on", "relink", "on"),
        ("CTUNE_RELINK", "0", "relink", "off"),
        ("CTUNE_RELINK", "Auto", "relink", "auto"),
    ],
)
def test_good_values_pass(tmp_path: Path, name, value, field, parsed) -> None:
    assert getattr(resolve(environ={name: value}, cwd=tmp_path), field) == parsed


@pytest.mark.parametrize(
    ("value", "on"),
    [
        *(("1", True), ("true", True), ("YES", True), ("on", True)),
        *(("0", False), ("false", False), ("no", False), ("off", False), ("", False)),
        ("maybe", False),
    ],
)
def test_ctune_debug_is_parsed_by_the_settings_rule(tmp_path: Path, value: str, on: bool) -> None:
    assert debug_enabled({"CTUNE_DEBUG": value}) is on
    if value != "maybe":  # which the settings refuse, in one line (so no traceback for it)
        assert resolve(environ={"CTUNE_DEBUG": value}, cwd=tmp_path).debug is on
    assert debug_enabled({}) is False


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("[tool]\nctune = 5\n", "pyproject.toml [tool] ctune = 5: expected a table"),
        ('tool = "x"\n', "pyproject.toml tool = 'x': expected a table"),
        ("tool = [1]\n", "pyproject.toml tool = [1]: expected a table"),
        (
            "[tool.ctune]\njobs = " + "9" * 5000 + "  # many\n",
            "pyproject.toml [tool.ctune] jobs: an integer of 5000 digits; expected at most",
        ),
        (
            '[tool.other]\nx = 1\n[tool.ctune]\n"jobs" = -' + "1_0" * 3000 + "\n",
            'pyproject.toml [tool.ctune] "jobs": an integer of 6000 digits',
        ),
    ],
)
def test_a_pyproject_of_the_wrong_shape_is_one_line_naming_the_key(
    tmp_path: Path, body: str, message: str
) -> None:
    (tmp_path / "pyproject.toml").write_text(body)
    with pytest.raises(UserError, match=re.escape(message)) as caught:
        resolve(environ={}, cwd=tmp_path)
    assert "\n" not in str(caught.value)


@pytest.mark.timeout(10)
def test_a_pyproject_that_is_not_a_regular_file_is_refused(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pyproject.toml")
    (tmp_path / "pyproject.toml").with_name("real").mkdir()
    # find_pyproject looks for a file; a FIFO there is skipped, not opened (no hang)
    assert resolve(environ={}, cwd=tmp_path).registry == Path("registry")
    big = tmp_path / "real" / "pyproject.toml"
    big.write_text("# " + "x" * (1024 * 1024) + "\n")
    with pytest.raises(UserError, match=r"settings file .*pyproject\.toml: larger than"):
        resolve(environ={}, cwd=tmp_path / "real")


def test_acf_spaces_is_a_path_setting_unset_by_default(tmp_path: Path) -> None:
    assert resolve(environ={}, cwd=tmp_path).acf_spaces is None
    deep = _project(tmp_path, 'acf_spaces = "spaces"')
    assert resolve(environ={}, cwd=deep).acf_spaces == tmp_path / "spaces"  # from the file's folder
    got = resolve(environ={"CTUNE_ACF_SPACES": "/opt/ciq"}, cwd=deep)
    assert got.acf_spaces == Path("/opt/ciq")
    with pytest.raises(UserError, match="CTUNE_ACF_SPACES='': expected a folder holding Compile"):
        resolve(environ={"CTUNE_ACF_SPACES": ""}, cwd=tmp_path)


def test_kernels_and_registry_resolve_from_the_project_folder_from_any_subfolder(
    tmp_path: Path,
) -> None:
    """`cd kernels && ctune check` reads the same specs and registry as at the root."""
    deep = _project(tmp_path, "")  # a [tool.ctune] table that sets neither folder
    for cwd in (tmp_path, deep):
        got = resolve(environ={}, cwd=cwd)
        assert (got.kernels, got.registry) == (tmp_path / "kernels", tmp_path / "registry")
    (tmp_path / "pyproject.toml").write_text('[tool.ctune]\nkernels = "specs"\n')
    assert resolve(environ={}, cwd=deep).kernels == tmp_path / "specs"
    # the environment and the command line are the user's, relative to where they stand
    assert resolve(environ={"CTUNE_KERNELS": "k"}, cwd=deep).kernels == Path("k")
    assert resolve({"kernels": Path("opt")}, environ={}, cwd=deep).kernels == Path("opt")
    with pytest.raises(UserError, match=r"CTUNE_KERNELS='': expected a folder of <kernel>\.yaml"):
        resolve(environ={"CTUNE_KERNELS": ""}, cwd=deep)


def test_without_a_ctune_table_the_folders_are_the_working_directorys(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "other"\n')
    got = resolve(environ={}, cwd=tmp_path)
    assert (got.kernels, got.registry) == (Path("kernels"), Path("registry"))


def test_an_unknown_ctune_variable_is_named_with_the_closest_setting() -> None:
    from ctune.config import unknown_variables

    environ = {
        "CTUNE_JBOS": "8",  # a typo
        "CTUNE_KERNEL": "k",
        "CTUNE_FROBNICATE": "1",  # close to nothing: the known names are listed
        "CTUNE_JOBS": "8",  # known, old names too
        "CTUNE_L2": "hot",
        "CTUNE_REQUIRE": "gpu",  # read by ctune's own test suite, not a setting
        "CTUNE_TEST_PTXAS": "/x",
        "OTHER_JBOS": "1",
    }
    frob, jbos, kernel = unknown_variables(environ)  # in the order of their names
    assert jbos == "CTUNE_JBOS is not a ctune setting and is ignored; did you mean CTUNE_JOBS?"
    assert kernel.endswith("did you mean CTUNE_KERNELS?")
    assert frob.startswith("CTUNE_FROBNICATE is not a ctune setting and is ignored; ctune reads ")
    assert "CTUNE_JOBS, CTUNE_KERNELS" in frob


def test_relink_is_auto_unless_set(tmp_path: Path) -> None:
    """auto by default; on and off as any boolean spelling, a TOML boolean included."""
    assert resolve(environ={}, cwd=tmp_path).relink == "auto"
    (tmp_path / "pyproject.toml").write_text("[tool.ctune]\nrelink = true\n")
    assert resolve(environ={}, cwd=tmp_path).relink == "on"
    assert resolve({"relink": "off"}, environ={}, cwd=tmp_path).relink == "off"
    assert resolve({"relink": False}, environ={}, cwd=tmp_path).relink == "off"
    assert resolve({"relink": "auto"}, environ={}, cwd=tmp_path).relink == "auto"
