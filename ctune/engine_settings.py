"""The ``executor`` and ``gpus`` settings, parsed without importing the engine.

``executor``: ``local`` (no engine: a thread pool of nvcc processes and one worker
process on one GPU, as always), ``dask`` (a Dask cluster started here, on this
host), ``auto`` (the cluster Dask's own configuration names, e.g.
``DASK_SCHEDULER_ADDRESS``, else ``local``) or the address of a running Dask
scheduler (``tcp://host:8786``, ``host:8786``).

``gpus``: empty (GPU 0), ``all``, or indices ``0,1``. More than one GPU needs the
engine: with ``executor = local`` a Dask cluster is started here for them.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from ctune.errors import UserError

_SCHEMES = ("tcp", "tls", "ucx")
_HOST_LABEL = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9])?$", re.ASCII)
_PORT = re.compile(r"^[0-9]{1,5}$", re.ASCII)
_GPUS = re.compile(r"^[0-9]+(,[0-9]+)*$", re.ASCII)


@dataclass(frozen=True)
class ExecutorChoice:
    """What the settings ask for: the kind of engine, and the scheduler address if any."""

    kind: str  # "local", "dask" (a cluster started here) or "address"
    address: str = ""

    @property
    def uses_engine(self) -> bool:
        return self.kind != "local"


def parse_executor(text: str) -> ExecutorChoice:
    """``local | dask | auto | ADDRESS``; ``auto`` stays ``auto`` until resolved."""
    raw = text.strip()
    if raw.lower() in ("local", "dask", "auto"):
        return ExecutorChoice(raw.lower())
    address = _address(raw)
    if address:
        return ExecutorChoice("address", address)
    raise UserError(
        f"executor={text!r}: allowed local, dask, auto or a Dask scheduler address "
        "(tcp://host:8786)"
    )


def _address(raw: str) -> str:
    """``[scheme://]host:port`` with a known scheme, a host name, an IPv4 address or a
    bracketed IPv6 address, and a port from 1 to 65535, as ``scheme://host:port``; "" when
    ``raw`` is not one (Dask would fail on it later with a ValueError, not a message)."""
    scheme, sep, rest = raw.partition("://")
    if not sep:
        scheme, rest = "tcp", raw
    host, colon, port = rest.rpartition(":")
    if scheme not in _SCHEMES or not colon or not _PORT.match(port):
        return ""
    if not 1 <= int(port) <= 65535 or not _is_host(host):
        return ""
    return f"{scheme}://{host}:{port}"


def _is_host(host: str) -> bool:
    if host.startswith("[") and host.endswith("]"):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            return False
        return True
    labels = host.split(".")
    return 0 < len(host) <= 253 and all(_HOST_LABEL.match(label) for label in labels)


def parse_gpus(text: str) -> str | tuple[int, ...]:
    """``""`` -> ``()`` (GPU 0 alone, no engine needed), ``all``, or distinct indices."""
    raw = text.strip().replace(" ", "")
    if not raw:
        return ()
    if raw.lower() == "all":
        return "all"
    if not _GPUS.match(raw):
        raise UserError(f"gpus={text!r}: allowed all or GPU indices like 0,1")
    indices = tuple(int(i) for i in raw.split(","))
    if len(set(indices)) != len(indices):
        raise UserError(f"gpus={text!r}: a GPU is named twice")
    return indices


def check(executor: str, gpus: str) -> None:
    """Range check for ``config``: one line naming the setting."""
    choice = parse_executor(executor)
    parsed = parse_gpus(gpus)
    if choice.kind == "address" and parsed:
        raise UserError(
            f"gpus={gpus!r} applies to an engine started here; a running cluster measures on "
            "its GPU workers (start one per GPU with --resources GPU=1)"
        )


__all__ = ["ExecutorChoice", "check", "parse_executor", "parse_gpus"]
