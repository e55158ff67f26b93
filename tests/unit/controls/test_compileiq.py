"""CompileIqEngine beyond the contract: lazy, light, one-line errors, identity, refusals."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ctune.controls.engine import ControlsEngineError, make_engine
from ctune.controls.spaces import space_file
from ctune.controls.store import ControlsError
from ctune.errors import EXIT_TOOLCHAIN, ToolchainError, UserError
from ctune.records import sha256_hex
from tests.unit.controls.test_contracts import _ptxas_space, _why_no_compileiq

needs_compileiq = pytest.mark.skipif(
    _why_no_compileiq() is not None, reason=str(_why_no_compileiq())
)


def _run(code: str, env: dict[str, str] | None = None) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_importing_the_engine_module_imports_no_compileiq() -> None:
    out = _run(
        "import sys, json; import ctune.controls.compileiq, ctune.controls.engine; "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('compileiq'))))"
    )
    assert out == []


def test_without_compileiq_making_the_engine_is_a_toolchain_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctune.controls.compileiq import CompileIqEngine

    monkeypatch.setitem(sys.modules, "compileiq.backends", None)  # as if not installed
    space = tmp_path / "ptxas13.3.bin"
    space.write_bytes(b"space")
    with pytest.raises(ToolchainError, match=r"pip install compileiq==1\.1\.0") as caught:
        CompileIqEngine(space, seed=1)
    assert caught.value.exit_code == EXIT_TOOLCHAIN and "\n" not in str(caught.value)


def test_a_missing_space_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"search space .*none\.bin: no such file"):
        make_engine("compileiq", space=tmp_path / "none.bin", seed=1)
    with pytest.raises(ControlsError, match=r"unknown \(known: compileiq, standin"):
        make_engine("nope", space=tmp_path, seed=1)


@needs_compileiq
def test_driving_the_engine_imports_no_ray_and_holds_blas_to_one_thread() -> None:
    code = (
        "import sys, json, os, pathlib\n"
        "from ctune.controls.compileiq import CompileIqEngine\n"
        f"e = CompileIqEngine(pathlib.Path({str(_ptxas_space())!r}), seed=1, "
        "options={'pool_size': 6})\n"
        "b = e.ask(); e.tell({p.id: 1.0 for p in b}); blob = e.checkpoint()\n"
        "f = CompileIqEngine(e.space, seed=1, options={'pool_size': 6}); f.restore(blob)\n"
        "print(json.dumps({'ray': 'ray' in sys.modules, "
        "'worker': 'compileiq.worker' in sys.modules, "
        "'blas': os.environ.get('OPENBLAS_NUM_THREADS'), "
        "'omp': os.environ.get('OMP_NUM_THREADS')}))"
    )
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    assert _run(code, env) == {"ray": False, "worker": False, "blas": "1", "omp": "1"}
    assert _run(code, {**env, "OMP_NUM_THREADS": "3"})["omp"] == "3"  # the user's own kept


@needs_compileiq
def test_identity_names_versions_and_the_space() -> None:
    space = _ptxas_space()
    assert space is not None
    with make_engine("compileiq", space=space, seed=4, options={"pool_size": 6}) as engine:
        identity = engine.identity()
    assert identity["engine"] == "compileiq"
    assert identity["compileiq"] == importlib.metadata.version("compileiq")
    assert identity["native"] and len(identity["native_sha256"]) == 64
    assert identity["space_sha256"] == sha256_hex(space.read_bytes())
    assert identity["pool_size"] == "6"


@needs_compileiq
def test_a_checkpoint_of_another_space_or_pool_is_refused_in_one_line() -> None:
    space = _ptxas_space()
    assert space is not None
    try:
        other = space_file("ptxas", "13.3", space.parent, "att")
    except ControlsError:
        pytest.skip("no ptxas 13.3 att space beside the default one")
    with make_engine("compileiq", space=space, seed=4, options={"pool_size": 6}) as engine:
        blob = engine.checkpoint()
    for target, pool, field in ((other, 6, "space_sha256"), (space, 8, "pool_size")):
        fresh = make_engine("compileiq", space=target, seed=4, options={"pool_size": pool})
        with fresh, pytest.raises(ControlsEngineError, match=field) as caught:
            fresh.restore(blob)
        assert "\n" not in str(caught.value)


@needs_compileiq
def test_bad_options_and_a_file_that_is_not_a_space_are_one_line(tmp_path: Path) -> None:
    space = _ptxas_space()
    assert space is not None
    with pytest.raises(ControlsError, match="compileiq engine options") as caught:
        make_engine("compileiq", space=space, seed=1, options={"no_such_option": 1})
    assert "\n" not in str(caught.value)
    with pytest.raises(ControlsError, match="pool_size"):
        make_engine("compileiq", space=space, seed=1, options={"pool_size": 1})
    with pytest.raises(ControlsError, match="greater than 5"):
        make_engine("compileiq", space=space, seed=1, options={"pool_size": 4})
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"not a space" * 100)
    with pytest.raises(ControlsError, match="CompileIQ cannot use it") as caught:
        make_engine("compileiq", space=junk, seed=1, options={"pool_size": 6}).ask()
    assert "\n" not in str(caught.value)
