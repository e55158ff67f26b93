"""Artifact files: round trip, digest, schema versions, strictness, fuzzing."""

from __future__ import annotations

import json
import random

import pytest
from registry_support import make_artifact

from ctune.errors import RegistryError
from ctune.registry import schema
from ctune.registry.schema import SCHEMA_VERSION, decode, encode


def _raw(data: dict) -> bytes:
    """Re-encode ``data`` with a correct digest (to test checks behind the digest)."""
    from ctune.records import canonical_json, sha256_hex

    body = {k: v for k, v in data.items() if k != "digest"}
    body["digest"] = sha256_hex(canonical_json(body))
    return json.dumps(body, indent=2, sort_keys=True).encode()


def test_round_trip_is_exact_and_reviewable() -> None:
    a = make_artifact()
    data = encode(a)
    assert data.endswith(b"}\n")
    assert data == encode(decode(data, "x"))
    assert decode(data, "x") == a
    parsed = json.loads(data)
    assert parsed["digest"] == a.digest()
    assert list(parsed) == sorted(parsed)  # sort_keys: stable diffs in review
    assert b'\n  "baseline": {' in data  # indent=2


def test_versions_are_strings_and_12_10_is_not_12_1() -> None:
    a = make_artifact(fingerprint={**make_artifact().fingerprint, "cuda_runtime": "12.10"})
    parsed = json.loads(encode(a))
    assert parsed["fingerprint"]["cuda_runtime"] == "12.10"
    bad = {**parsed, "fingerprint": {**parsed["fingerprint"], "cuda_runtime": 12.1}}
    with pytest.raises(RegistryError, match=r"fingerprint\.cuda_runtime"):
        decode(_raw(bad), "f.json")


def test_digest_mismatch_names_the_file() -> None:
    data = encode(make_artifact()).replace(b'"seed": 7', b'"seed": 8')
    with pytest.raises(RegistryError, match=r"f\.json: digest mismatch"):
        decode(data, "f.json")


def test_older_and_newer_schema_say_what_to_do() -> None:
    parsed = json.loads(encode(make_artifact()))
    older = _raw({**parsed, "schema_version": SCHEMA_VERSION - 1})
    newer = _raw({**parsed, "schema_version": SCHEMA_VERSION + 1})
    with pytest.raises(RegistryError, match="ctune registry migrate"):
        decode(older, "f.json")
    with pytest.raises(RegistryError, match="Upgrade ctune"):
        decode(newer, "f.json")


def test_unknown_fields_refused_except_extensions() -> None:
    parsed = json.loads(encode(make_artifact()))
    with pytest.raises(RegistryError, match="unknown field"):
        decode(_raw({**parsed, "surprise": 1}), "f")
    with pytest.raises(RegistryError, match="unknown field"):
        decode(_raw({**parsed, "fingerprint": {**parsed["fingerprint"], "gpu_uuid": "x"}}), "f")
    ok = decode(_raw({**parsed, "extensions": {"team": {"owner": "x"}}}), "f")
    assert ok.extensions == {"team": {"owner": "x"}}


@pytest.mark.parametrize(
    ("path", "value", "match"),
    [
        (("front", 0, "key"), "0" * 16, "is not the candidate's key"),
        (("front", 0, "values"), [1.0], "2 objectives"),
        (("front", 0, "nvcc_flags"), ["-O3; rm -rf /"], "nvcc_flags"),
        (("front", 0, "defines"), {"X": "1\n#include </etc/passwd>"}, "defines.X"),
        (("front", 0, "defines"), {"bad name": 1}, "defines key"),
        # characters a shell ignores, yet no build writes them: an export would run them
        (("front", 0, "nvcc_flags"), ["-Xcompiler=-fplugin=/tmp/e.so"], "no build writes it"),
        (("front", 0, "nvcc_flags"), ["-Xcompiler", "-fplugin=/tmp/e.so"], "no build writes it"),
        (("front", 0, "nvcc_flags"), ["-o", "/tmp/x"], "no build writes it"),
        (("front", 0, "nvcc_flags"), ["--dryrun"], "no build writes it"),
        (("front", 0, "nvcc_flags"), ["-Xptxas", "--apply-controls=/x.acf"], "no build writes"),
        # a define named like a gene holds the gene's value; no comment hides the lines after
        (("front", 0, "defines"), {"BLOCK_M": 32, "STAGES": 3}, "defines.BLOCK_M.*gene is 128"),
        (("front", 0, "defines"), {"USE_TMA": "1 /*"}, "defines.USE_TMA"),
        (("front", 0, "launch"), {"grid": [1, 2]}, "3 dimensions"),
        (("front", 0, "candidate", "kernel"), "other", "not 'gemm'"),
        (("pinned",), "ffffffffffffffff", "not a member"),
        (("objectives", 0, "direction"), "up", "'min' or 'max'"),
        (("provenance", "seed"), "seven", "provenance.seed"),
        (("provenance", "source_dirty"), 1, "provenance.source_dirty"),
        (("kernel",), "../x", "kernel"),
        (("front", 0, "samples_ms"), [1.0, "2"], "samples_ms"),
        # the plan's values: check, refresh and retune did arithmetic on them (exit 70)
        (("protocol", "plan", "rep_ms"), "x", r"f: protocol\.plan: rep_ms='x' is not a number"),
        (("protocol", "plan", "warmup_ms"), [1], r"protocol\.plan: warmup_ms=\[1\] is not"),
        (("protocol", "plan", "quantile"), 5, r"protocol\.plan: .*quantile=5 must lie in"),
        (("protocol", "plan", "rep_ms"), -1, r"protocol\.plan: .*rep_ms=-1 must be"),
    ],
)
def test_wrong_content_behind_a_valid_digest(path: tuple, value: object, match: str) -> None:
    parsed = json.loads(encode(make_artifact()))
    node = parsed
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    with pytest.raises(RegistryError, match=match):
        decode(_raw(parsed), "f")


def test_writing_an_invalid_artifact_is_refused() -> None:
    import dataclasses

    a = make_artifact()
    m = dataclasses.replace(a.front[0], values=(float("nan"), 1.0))
    with pytest.raises(RegistryError):
        encode(dataclasses.replace(a, front=(m, a.front[1])))
    with pytest.raises(RegistryError):
        encode(dataclasses.replace(a, fingerprint={**a.fingerprint, "cuda_runtime": 12.1}))


# --- fuzzing: every malformed file raises RegistryError, nothing else ----------


def _only_registry_error(data: bytes, original: bytes | None) -> None:
    """RegistryError, or an artifact: the original one unless the digest was redone."""
    try:
        got = decode(data, "fuzz.json")
    except RegistryError:
        return
    if original is None:  # content changed behind a recomputed digest: still valid
        assert decode(encode(got), "again") == got
    else:
        assert got == decode(original, "orig")


def test_fuzz_truncation() -> None:
    data = encode(make_artifact())
    for cut in range(0, len(data), max(1, len(data) // 400)):
        _only_registry_error(data[:cut], data)


def test_fuzz_bit_flips() -> None:
    rng = random.Random(1234)
    data = encode(make_artifact())
    for _ in range(1500):
        buf = bytearray(data)
        for _ in range(rng.choice((1, 1, 2, 8))):
            buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
        _only_registry_error(bytes(buf), data)


def test_fuzz_wrong_types_everywhere() -> None:
    rng = random.Random(99)
    original = encode(make_artifact())
    replacements = [
        None,
        True,
        0,
        -1,
        1.5,
        "",
        "x" * 300,
        [],
        [None],
        {},
        {"a": None},
        [1, [2, [3]]],
        2**70,
    ]

    def paths(node, prefix=()):
        yield prefix
        if isinstance(node, dict):
            for k, v in node.items():
                yield from paths(v, (*prefix, k))
        elif isinstance(node, list):
            for i, v in enumerate(node[:3]):
                yield from paths(v, (*prefix, i))

    all_paths = [p for p in paths(json.loads(original)) if p]
    for path in all_paths:
        for value in rng.sample(replacements, 4):
            parsed = json.loads(original)
            node = parsed
            for step in path[:-1]:
                node = node[step]
            node[path[-1]] = value
            _only_registry_error(_raw(parsed), None)
            _only_registry_error(json.dumps(parsed).encode(), original)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"[]",
        b"null",
        b"\xff\xfe{}",
        b'{"schema_version": 1, "schema_version": 1}',
        b'{"schema_version": 1, "a": NaN}',
        b'{"schema_version": 1, "a": Infinity}',
        b'{"schema_version": true}',
        b'{"schema_version": "1"}',
        b"[" * 100_000 + b"]" * 100_000,
        b'{"a": ' * 50_000 + b"1" + b"}" * 50_000,
        b" " * (schema.MAX_BYTES + 1),
    ],
    ids=[
        "empty",
        "array",
        "null",
        "utf16",
        "dupkey",
        "nan",
        "inf",
        "bool-version",
        "str-version",
        "deep-array",
        "deep-object",
        "huge",
    ],
)
def test_malformed_files(data: bytes) -> None:
    with pytest.raises(RegistryError):
        decode(data, "bad.json")


def test_duplicate_keys_deep_inside() -> None:
    text = encode(make_artifact()).decode()
    dup = text.replace('"seed": 7,', '"seed": 7,\n    "seed": 8,', 1)
    assert dup != text
    with pytest.raises(RegistryError, match="duplicate key 'seed'"):
        decode(dup.encode(), "f")
