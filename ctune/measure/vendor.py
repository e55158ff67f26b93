"""The spec's vendor call as one more thing to measure: the library call (cuBLAS, SDPA) that
the kernel would replace, checked and timed by the worker's code for a build.

The spec names it ``vendor: {python: FILE.py:FUNCTION, name: TEXT}``. FUNCTION is called
as ``FUNCTION(xp, arrays, dims, dtypes)`` with the kernel's own device buffers (storage
dtypes: a ``bfloat16`` buffer holds its bits as ``uint16``), the problem's dims and the
spec dtype of each buffer. It returns a callable of no arguments that enqueues the call on
``xp``'s current stream and writes the kernel's outputs, or returns them as a mapping by
name (arrays it made, in the buffers' storage dtypes, any DLPack type); any other value it
returns is ignored. The worker checks those outputs against the reference, then times the
call by the protocol's method: the same inputs, stream and L2 policy as the builds'. The
callers give it a worker process of its own, so its library's state never reaches a build.

A vendor measurement is keyed as a candidate of its own (:func:`vendor_candidate`): the
kernel's name with ``@vendor`` (a name no spec can take) and the default genes, so that
runtime scalars are filled as for the default build.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ctune.records import Build, Candidate, Outcome

if TYPE_CHECKING:
    from ctune.measure.arrays import Buffers
    from ctune.spec import KernelSpec

#: what follows the kernel's name in a vendor candidate's kernel field
VENDOR_SUFFIX = "@vendor"


def vendor_candidate(spec: KernelSpec) -> Candidate:
    """The candidate a vendor measurement is keyed by."""
    return Candidate.of(spec.name + VENDOR_SUFFIX, spec.space.default_values())


def vendor_build(spec: KernelSpec) -> Build:
    """A build record for the vendor call: nothing compiled, named by the spec's name."""
    candidate = vendor_candidate(spec)
    return Build(
        candidate_key=candidate.key(),
        argv=(),
        toolchain=f"vendor: {spec.vendor_name}",
        outcome=Outcome.OK,
    )


def is_vendor(candidate: Candidate) -> bool:
    return candidate.kernel.endswith(VENDOR_SUFFIX)


class VendorError(RuntimeError):
    """The vendor function failed (it did not import, raised, or returned no callable): the
    vendor measurement is recorded as failed, and the search goes on without it."""


def load_vendor(cupy: Any, spec: KernelSpec, dims: dict[str, int]) -> VendorLaunch:
    """The spec's vendor call, ready to bind; :class:`VendorError` when it cannot be."""
    from ctune.errors import SpecError

    try:
        function = spec.vendor()
    except SpecError as exc:
        raise VendorError(str(exc)) from None
    if function is None:
        raise VendorError(f"{spec.yaml_path.name} names no vendor call")
    return VendorLaunch(cupy, function, dims)


class VendorLaunch:
    """The vendor call bound to one set of buffers, launched on the worker's stream (the
    interface of a loaded build: ``bind(buffers, stream)``).

    A call that cannot write into the kernel's outputs (SDPA returns a new tensor) returns
    them instead, by name; :meth:`publish` copies them into the buffers for the correctness
    check, outside the timed call."""

    def __init__(self, cupy: Any, function: Callable[..., Any], dims: dict[str, int]) -> None:
        self._cupy = cupy
        self._function = function
        self._dims = dims
        self._returned: Mapping[str, Any] | None = None  # the last call's returned outputs

    def bind(self, buffers: Buffers, stream: Any) -> Callable[[], None]:
        with _current(stream), _as_vendor_error("setting up"):
            call = self._function(
                self._cupy, dict(buffers.arrays), dict(self._dims), dict(buffers.dtypes)
            )
        if not callable(call):
            raise VendorError(
                f"the vendor function must return a callable of no arguments, "
                f"got {type(call).__name__}"
            )

        def launch() -> None:
            with _current(stream), _as_vendor_error("launching"):
                returned = call()
            # a mapping is the outputs by name; anything else (matmul's out=) is ignored
            self._returned = returned if isinstance(returned, Mapping) else None

        return launch

    def publish(self, buffers: Buffers, stream: Any) -> None:
        """The last call's returned outputs copied into ``buffers`` (nothing when it wrote
        them itself): each by DLPack, in the buffer's storage dtype and shape."""
        returned, self._returned = self._returned, None
        if not returned:
            return
        xp = self._cupy
        with _current(stream), _as_vendor_error("returning its outputs"):
            for name, value in returned.items():
                if name not in buffers.names("output", "inout"):
                    raise VendorError(f"the vendor call returned {name!r}, not an output")
                target = buffers.arrays[name]
                got = xp.from_dlpack(value)
                if got.dtype.itemsize != target.dtype.itemsize or got.size != target.size:
                    raise VendorError(
                        f"the vendor call's {name} is {got.dtype}{list(got.shape)}; the "
                        f"output is {target.dtype}{list(target.shape)}"
                    )
                xp.copyto(target, got.view(target.dtype).reshape(target.shape))


@contextlib.contextmanager
def _current(stream: Any) -> Iterator[None]:
    """``stream`` current while the vendor's code runs, and again after it, whatever that
    code did. Not CuPy's ``with stream:``, which on leaving makes current the stream its
    own stack holds (the null stream, where the worker made its stream current with
    ``use()``): the builds measured next in the process would launch there, untimed."""
    stream.use()
    try:
        yield
    finally:
        stream.use()


@contextlib.contextmanager
def _as_vendor_error(doing: str) -> Iterator[None]:
    """What the vendor's code raises, as a :class:`VendorError`; a CUDA fault stays what it
    is (the worker classifies it as it does a build's)."""
    from ctune.measure.device import classify_exception

    try:
        yield
    except VendorError:
        raise
    except Exception as exc:
        if classify_exception(exc) is not None:
            raise
        raise VendorError(f"the vendor call raised {type(exc).__name__} {doing}: {exc}") from None


__all__ = [
    "VENDOR_SUFFIX",
    "VendorError",
    "VendorLaunch",
    "is_vendor",
    "load_vendor",
    "vendor_build",
    "vendor_candidate",
]
