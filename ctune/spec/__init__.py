"""A kernel's spec: the model every layer reads (``model``), the loader that validates a YAML
sidecar into it (``loader``), and the rules the spec is written in: the entry grammar
(``entry``), the fixed flags a spec may add (``flags``), the include_dirs tokens
(``includes``). docs/spec-format.md is the reference for the file itself."""

from ctune.spec.loader import load_spec, sidecar_for
from ctune.spec.model import (
    DEVICE_GENES,
    DTYPE_BYTES,
    DTYPES,
    ENTRY_KINDS,
    ROLES,
    ArgSpec,
    Geometry,
    GivenData,
    KernelSpec,
    LaunchConfigError,
    LaunchRule,
    Problem,
    Tolerance,
    launch_geometry,
)

__all__ = [
    "DEVICE_GENES",
    "DTYPES",
    "DTYPE_BYTES",
    "ENTRY_KINDS",
    "ROLES",
    "ArgSpec",
    "Geometry",
    "GivenData",
    "KernelSpec",
    "LaunchConfigError",
    "LaunchRule",
    "Problem",
    "Tolerance",
    "launch_geometry",
    "load_spec",
    "sidecar_for",
]
