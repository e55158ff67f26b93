"""The one exception tree ctune raises, and the exit codes the CLI maps it to.

Candidate-level problems (a build that fails, a kernel that faults) are never
exceptions: they are :class:`ctune.records.Outcome` values. Exceptions are for
infrastructure and input problems, and each carries a one-line message that
says what went wrong, where, and what to do.
"""

from __future__ import annotations

#: Exit codes shared by every command; `ctune --help` documents them.
EXIT_OK = 0
EXIT_GATE_FAILED = 1  # check found stale artifacts / gate found a regression
EXIT_USER_ERROR = 2  # bad path, bad yaml, unknown objective, schema mismatch
EXIT_TOOLCHAIN = 3  # nvcc missing, no GPU where one is needed, a full disk
EXIT_INCONCLUSIVE = 4  # the gate could not decide; a search found nothing worth pinning
EXIT_REMOTE = 5  # registry push or pull failed (offline, auth, kept moving); local work kept
EXIT_INTERRUPTED = 130


class CtuneError(Exception):
    """Root of ctune's errors; ``str(err)`` is the one line shown to users."""

    exit_code = EXIT_USER_ERROR


class UserError(CtuneError):
    """Bad input: a path, a spec, an option or a name the user can fix."""

    exit_code = EXIT_USER_ERROR


class SpecError(UserError):
    """A kernel spec (yaml sidecar) is invalid; the message names file and key."""


class ToolchainError(CtuneError):
    """nvcc, ptxas, the GPU or NVML is missing or unusable."""

    exit_code = EXIT_TOOLCHAIN


class RegistryError(CtuneError):
    """The registry cannot be read or written safely (lock, schema, digest)."""

    exit_code = EXIT_USER_ERROR


class RemoteError(RegistryError):
    """Sharing the registry failed: no remote, offline, auth, refused, or it kept moving.

    The local commits are intact; running the push (or pull) again later is the fix.
    """

    exit_code = EXIT_REMOTE


class DeviceUnhealthy(ToolchainError):
    """The GPU did not pass a health check after a fault; the run ends cleanly."""


class GateFailure(CtuneError):
    """A staleness check or regression gate failed; the report was rendered."""

    exit_code = EXIT_GATE_FAILED


class GateInconclusive(CtuneError):
    """The gate could not decide; never reported as pass or fail."""

    exit_code = EXIT_INCONCLUSIVE


class SearchInconclusive(CtuneError):
    """A search ended with nothing worth pinning (the constraints left only builds the
    default build beats, or nothing); the report above says why."""

    exit_code = EXIT_INCONCLUSIVE
