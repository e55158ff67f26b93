"""A spec's acf key: the compilers whose controls files are genes, and its own files."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from ctune.errors import SpecError
from ctune.records import sha256_hex
from ctune.spec import load_spec

DATA = Path(__file__).parents[1] / "data" / "kernels"


@pytest.fixture
def saxpy(tmp_path: Path) -> Path:
    for name in ("saxpy.cu", "saxpy.yaml", "saxpy_ref.py"):
        shutil.copy(DATA / name, tmp_path / name)
    (tmp_path / "tuned.acf").write_bytes(b"\x01controls")
    return tmp_path / "saxpy.yaml"


def _with(path: Path, **keys: object) -> Path:
    data = yaml.safe_load(path.read_text())
    data.update(keys)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_acf_adds_an_open_gene_per_compiler_seeded_with_the_spec_s_files(saxpy: Path) -> None:
    spec = load_spec(_with(saxpy, acf=["nvcc", "ptxas"], acf_files={"ptxas": ["tuned.acf"]}))
    assert spec.acf == ("nvcc", "ptxas")
    ptxas, nvcc = spec.space.gene("acf_ptxas"), spec.space.gene("acf_nvcc")
    assert ptxas.open and ptxas.values == ("none",) and ptxas.default == "none"
    assert ptxas.suggest == (sha256_hex(b"\x01controls"),) and nvcc.suggest == ()
    assert spec.acf_seeds["ptxas"] == ((sha256_hex(b"\x01controls"), saxpy.parent / "tuned.acf"),)
    assert spec.default_candidate().as_dict()["acf_ptxas"] == "none"
    narrowed = spec.with_acf(("ptxas",))
    assert [g.name for g in narrowed.space.genes if g.family == "acf"] == ["acf_ptxas"]
    assert narrowed.space.gene("acf_ptxas").suggest == ptxas.suggest
    assert "acf_ptxas" not in spec.with_acf(()).space


def test_without_acf_there_is_no_acf_gene(saxpy: Path) -> None:
    assert not [g for g in load_spec(saxpy).space.genes if g.family == "acf"]


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"acf": ["cicc"]}, "acf: 'cicc' is not a compiler with controls files"),
        ({"acf": ["ptxas", "ptxas"]}, "acf: names a compiler twice"),
        ({"acf": "ptxas"}, "acf: expected a list of strings"),
        ({"acf": ["ptxas"], "acf_files": ["tuned.acf"]}, "acf_files: expected a mapping"),
        ({"acf": ["ptxas"], "acf_files": {"nvcc": ["tuned.acf"]}}, "'nvcc' is not in acf"),
        ({"acf": ["ptxas"], "acf_files": {"ptxas": ["../x.acf"]}}, "not a file inside"),
        ({"acf": ["ptxas"], "acf_files": {"ptxas": ["gone.acf"]}}, "not a file inside"),
        ({"flags": ["apply_controls"]}, "controls files are the acf genes now"),
        ({"genes": {"acf_ptxas": {"values": [1, 2]}}}, "clashes with a flag gene"),
    ],
)
def test_a_bad_acf_is_one_line_naming_the_key(
    saxpy: Path, keys: dict[str, object], message: str
) -> None:
    with pytest.raises(SpecError, match=message) as caught:
        load_spec(_with(saxpy, **keys))
    assert "\n" not in str(caught.value) and str(saxpy.name) in str(caught.value)


def test_an_empty_controls_file_is_refused(saxpy: Path) -> None:
    (saxpy.parent / "empty.acf").write_bytes(b"")
    with pytest.raises(SpecError, match=r"empty\.acf is empty"):
        load_spec(_with(saxpy, acf=["ptxas"], acf_files={"ptxas": ["empty.acf"]}))


def test_a_recorded_candidate_s_acf_genes_widen_a_spec_that_names_none(saxpy: Path) -> None:
    spec = load_spec(saxpy)
    recorded = {**spec.space.default_values(), "acf_ptxas": "ab" * 32}
    widened = spec.with_acf_of(recorded)
    assert widened.acf == ("ptxas",) and "acf_ptxas" in widened.space
    assert widened.in_space(widened.candidate(recorded)).as_dict()["acf_ptxas"] == "ab" * 32
    assert spec.with_acf_of(spec.space.default_values()) is spec
