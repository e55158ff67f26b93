"""Imports every command module so that each registers itself on the app."""

from ctune.cli import bench as _bench  # noqa: F401
from ctune.cli import check as _check  # noqa: F401
from ctune.cli import compile as _compile  # noqa: F401
from ctune.cli import doctor as _doctor  # noqa: F401
from ctune.cli import gate as _gate  # noqa: F401
from ctune.cli import init as _init  # noqa: F401
from ctune.cli import plot as _plot  # noqa: F401
from ctune.cli import registry as _registry  # noqa: F401
from ctune.cli import results as _results  # noqa: F401
from ctune.cli import search as _search  # noqa: F401
