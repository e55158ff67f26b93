"""CompileIqEngine: NVIDIA CompileIQ's native engine (``amber``) as a ControlsEngine.

Driven through ``compileiq.backends`` only: ``compileiq.worker`` (and so ``Search``) imports
ray and sets the process's multiprocessing start method, and ctune needs neither. CompileIQ
is imported when an engine is made, never with ctune; its numerical libraries are held to
one thread (``OPENBLAS_NUM_THREADS``/``OMP_NUM_THREADS`` set to 1 unless the user set them)
so it does not take the CPU from compiles and measurement. The space is a file (a
``ptxas13.3.bin``, ``ctune.controls.spaces``), so CompileIQ never downloads one.

A checkpoint is CompileIQ's sealed bytes behind a one-line header naming what a restore
needs to match (the native build, the space's digest, the pool): another build or space
is refused in one line before CompileIQ sees the bytes, and damaged bytes are too.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

from ctune.controls.engine import ControlsEngine, ControlsEngineError, Proposal, failed
from ctune.controls.store import ControlsError
from ctune.errors import ToolchainError
from ctune.files import read_capped
from ctune.records import canonical_json, sha256_hex

#: the largest search-space file read (CompileIQ's are 13-150 kB)
MAX_SPACE_BYTES = 16 * 1024 * 1024
#: CompileIQ's engine that ctune drives
BACKEND = "amber"
#: options ctune reads itself; the others go to CompileIQ's engine options as they are
OWN_OPTIONS = {
    "pool_size": 32,  # proposals per generation
    # the engine's configuration requires a generation count, yet it does not stop there:
    # the caller stops; it must only be the same when a checkpoint is restored
    "generations": 1000,
}
_MAGIC = b"ctune-controls-checkpoint 1\n"
#: identity fields a checkpoint must share with the engine restoring it
_RESTORE_MUST_MATCH = ("engine", "native_sha256", "space_sha256", "pool_size", "generations")
_INSTALL = "pip install compileiq==1.1.0 (NVIDIA's licence: docs/advanced-controls.md)"


def _hold_threads() -> None:
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        os.environ.setdefault(name, "1")


def _compileiq() -> SimpleNamespace:
    """CompileIQ's backend API, imported now; ToolchainError (exit 3) when not installed."""
    _hold_threads()
    try:
        import compileiq.backends as backends
        from compileiq.types import InternalSearchConfiguration
        from compileiq.utils.validation import INVALID_SCORE, Score
    except ImportError as exc:
        raise ToolchainError(f"the compileiq engine needs CompileIQ ({exc}): {_INSTALL}") from None
    return SimpleNamespace(
        backends=backends,
        config=InternalSearchConfiguration,
        Score=Score,
        INVALID=INVALID_SCORE,
    )


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300] or type(exc).__name__


class CompileIqEngine(ControlsEngine):
    """CompileIQ's evolutionary engine over one protected search space file."""

    name: ClassVar[str] = "compileiq"

    def __init__(self, space: Path, *, seed: int, options: Mapping[str, Any] | None = None):
        given = dict(options or {})
        own = {k: given.pop(k, v) for k, v in OWN_OPTIONS.items()}
        for key, value in own.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 2:
                raise ControlsError(
                    f"compileiq engine option {key}={value!r}: expected an int >= 2"
                )
        self.space = Path(space)
        self._space_sha256 = sha256_hex(read_capped(self.space, MAX_SPACE_BYTES, "search space"))
        self._ciq = _compileiq()
        registration = self._ciq.backends.get_backend_registration(BACKEND)
        try:
            config = self._ciq.config(generations=own["generations"], pool_size=own["pool_size"])
            engine_options = (
                registration.options_model(seed=seed, **given).model_dump()
                if registration.options_model is not None
                else {"seed": seed, **given}
            )
            if registration.search_config_validator is not None:
                registration.search_config_validator(config)
        except (ValueError, TypeError) as exc:  # pydantic's ValidationError is a ValueError
            raise ControlsError(f"compileiq engine options: {_one_line(exc)}") from None
        self._identity = {
            "engine": self.name,
            "compileiq": importlib.metadata.version("compileiq"),
            "native": _native_version(),
            "native_sha256": registration.artifact.artifact_sha256,
            "space_sha256": self._space_sha256,
            "pool_size": str(own["pool_size"]),
            "generations": str(own["generations"]),
            "seed": str(seed),
        }
        try:
            self._backend = self._ciq.backends.create_backend(
                BACKEND,
                search_space=self.space,
                search_config=config,
                debug=False,
                options=engine_options,
            )
        except RuntimeError as exc:  # a file that is not a space
            raise self._not_a_space(exc) from None

    def _not_a_space(self, exc: BaseException) -> ControlsError:
        return ControlsError(
            f"search space {self.space}: CompileIQ cannot use it ({_one_line(exc)}); "
            "give one of CompileIQ's space files (acf_spaces)"
        )

    # --- the contract -------------------------------------------------------------------
    def ask(self, n: int | None = None) -> list[Proposal]:
        if n is not None and n < 1:
            return []
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # "N failed ... unfilled": known
                batch = self._backend.ask(n)
        except self._ciq.backends.SearchSpaceExhaustedError:
            return []
        except RuntimeError as exc:  # a file that is not a space, if creation took it
            raise self._not_a_space(exc) from None
        out = []
        for candidate in batch:
            if not isinstance(candidate.params, str):
                raise ControlsError(
                    f"search space {self.space}: proposes parameters, not controls files; "
                    "give a compiler space (ptxas13.3.bin, nvcc13.3.bin)"
                )
            out.append(Proposal(str(candidate.param_id), bytes.fromhex(candidate.params)))
        return out

    def tell(self, scores: Mapping[str, float | None]) -> None:
        self._check_told(scores)
        if not scores:
            return
        ids = {str(c.param_id): c.param_id for c in self._backend.pending_candidates}
        told = [
            self._ciq.Score(
                score=self._ciq.INVALID if failed(value) else float(value),  # type: ignore[arg-type]
                param_id=ids[key],
                num_objectives=1,
            )
            for key, value in scores.items()
        ]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            self._backend.tell(told)

    def checkpoint(self) -> bytes:
        sealed = self._backend.checkpoint()
        header = {"identity": self._identity, "sha256": sha256_hex(sealed), "bytes": len(sealed)}
        return _MAGIC + canonical_json(header).encode() + b"\n" + sealed

    def restore(self, blob: bytes) -> None:
        header, sealed = _unwrap(blob)
        theirs = header.get("identity", {})
        for key in _RESTORE_MUST_MATCH:
            if theirs.get(key) != self._identity[key]:
                raise ControlsEngineError(
                    f"controls engine checkpoint: made with {key} {theirs.get(key)!r}, this "
                    f"engine has {self._identity[key]!r}; resume with the same CompileIQ and "
                    "search space, or start the search afresh"
                )
        try:
            self._backend.restore(sealed)
        except (ValueError, RuntimeError) as exc:
            raise ControlsEngineError(
                f"controls engine checkpoint: CompileIQ refuses it ({_one_line(exc)}); "
                "start the search afresh"
            ) from None

    @property
    def generation(self) -> int:
        return int(self._backend.current_generation)

    @property
    def pending(self) -> tuple[str, ...]:
        return tuple(str(c.param_id) for c in self._backend.pending_candidates)

    def identity(self) -> dict[str, str]:
        return dict(self._identity)

    def close(self) -> None:
        backend = getattr(self, "_backend", None)
        if backend is not None:
            backend.close()
            self._backend = None


def _native_version() -> str:
    try:
        import compileiq_native_runtime as native
    except ImportError:
        return "unknown"
    return str(getattr(native, "__version__", "unknown"))


def _unwrap(blob: bytes) -> tuple[dict[str, Any], bytes]:
    """(header, CompileIQ's sealed bytes) of a checkpoint; one line when it is not whole."""
    damaged = "controls engine checkpoint: damaged ({}); start the search afresh"
    if not isinstance(blob, bytes | bytearray) or not blob.startswith(_MAGIC):
        raise ControlsEngineError(damaged.format("not a ctune controls checkpoint"))
    head, sep, sealed = bytes(blob[len(_MAGIC) :]).partition(b"\n")
    try:
        header = json.loads(head.decode("utf-8")) if sep else None
    except (UnicodeDecodeError, ValueError):
        header = None
    if not isinstance(header, dict) or not isinstance(header.get("identity"), dict):
        raise ControlsEngineError(damaged.format("its header is unreadable"))
    if header.get("bytes") != len(sealed) or header.get("sha256") != sha256_hex(sealed):
        raise ControlsEngineError(damaged.format("its bytes do not match their digest"))
    return header, sealed


__all__ = ["OWN_OPTIONS", "CompileIqEngine"]
