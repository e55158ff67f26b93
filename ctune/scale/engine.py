"""The engine: a Dask distributed client, to a cluster started here or running elsewhere.

Compiles run on workers that offer the ``compile`` resource (one nvcc each), measurement
on workers that offer ``GPU`` (one per GPU, one thread: one candidate at a time). A
cluster started here (``executor = dask``, or several ``gpus``) is a ``SpecCluster`` of
Nannies: the Nanny restarts a worker that dies, which is how a killed compile or GPU
worker is replaced. The scheduler retries a task whose worker died once
(``allowed-failures = 1``); a second death is the engine's ``KilledWorker``, which the
compiler and the measurer record as the candidate's failure. Several ctune parts share
one engine per settings (reference counted): the compiler and the measurer of a search
talk to the same cluster.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctune.engine_settings import ExecutorChoice, parse_executor, parse_gpus
from ctune.errors import ToolchainError, UserError

if TYPE_CHECKING:
    from ctune.config import Settings

log = logging.getLogger(__name__)

COMPILE = "compile"  # the resource a compile worker offers (one nvcc per unit)
GPU = "GPU"  # the resource a measuring worker offers (one per GPU)
CONNECT_TIMEOUT_S = 30.0
INSTALL_HINT = "pip install 'ctune[cluster]' (dask, distributed)"


def require_distributed() -> Any:
    """The ``distributed`` module, or the one-line ToolchainError (exit 3) naming the extra."""
    try:
        import distributed
    except ImportError as exc:
        raise ToolchainError(
            f"the Dask engine is not installed ({exc.name or 'distributed'} missing); "
            f"install the cluster extra: {INSTALL_HINT}"
        ) from None
    return distributed


def host_token() -> str:
    """Which host (and boot) a process runs on: equal tokens share a filesystem view."""
    boot = ""
    with contextlib.suppress(OSError):
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    return f"{socket.gethostname()}/{boot}"


def count_gpus() -> int:
    """CUDA devices on this host (NVML, else CuPy); 0 when neither answers."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return int(pynvml.nvmlDeviceGetCount())
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no NVML library or no driver: try CuPy
        pass
    try:
        import cupy

        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # no CuPy, no driver
        return 0


def resolve_gpus(gpus: str) -> tuple[int, ...]:
    """The GPU indices to measure on: ``()`` -> (0,), ``all`` -> every visible one."""
    parsed = parse_gpus(gpus)
    if parsed == "all":
        n = count_gpus()
        if n == 0:
            raise ToolchainError("gpus=all: no CUDA GPU visible on this host (`ctune doctor`)")
        return tuple(range(n))
    assert not isinstance(parsed, str)
    return parsed or (0,)


def resolve_executor(settings: Settings) -> ExecutorChoice:
    """``auto`` becomes the address in Dask's configuration, else ``local``; several GPUs
    with ``local`` become ``dask`` (the engine started here)."""
    choice = parse_executor(settings.executor)
    if choice.kind == "auto":
        address = ""
        with contextlib.suppress(ImportError):
            import dask

            address = str(dask.config.get("scheduler-address", None) or "")
        try:
            choice = parse_executor(address) if address else ExecutorChoice("local")
        except UserError:
            raise UserError(
                f"executor=auto: Dask's configured scheduler-address {address!r} "
                "(DASK_SCHEDULER_ADDRESS) is not an address such as tcp://host:8786"
            ) from None
    if choice.kind == "local" and len(resolve_gpus(settings.gpus)) > 1:
        choice = ExecutorChoice("dask")
    return choice


#: the workers' Dask configuration: distributed's NVML diagnostics off. ctune reads NVML
#: itself where it measures; distributed's probe at a worker's start raised
#: NVMLError_InvalidArgument on a lent H200 and so no worker started (docs/scale-out.md).
#: A key path, not a nested dict: the Nanny merges it shallowly into the whole config.
WORKER_CONFIG: dict[str, Any] = {"distributed.diagnostics.nvml": False}


def _worker_env(device: int | None) -> dict[str, str]:
    """This ctune importable in the worker (a source checkout too); a GPU worker sees one GPU."""
    from ctune.measure.session import worker_env

    env = {k: v for k, v in worker_env().items() if k in ("PYTHONPATH", "PYTHONUNBUFFERED")}
    if device is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(device)
    return env


def _gpu_worker_options(device: int) -> dict[str, Any]:
    """One Nanny per GPU, pinned with CUDA_VISIBLE_DEVICES; with dask-cuda installed, also
    bound to the CPU cores nearest its GPU (dask-cuda's affinity plugin)."""
    options: dict[str, Any] = {
        "nthreads": 1,
        "resources": {GPU: 1},
        "env": _worker_env(device),
        "config": WORKER_CONFIG,
        "memory_limit": 0,
        "silence_logs": logging.ERROR,
    }
    try:
        from dask_cuda.plugins import CPUAffinity
        from dask_cuda.utils import get_cpu_affinity

        options["plugins"] = {CPUAffinity(get_cpu_affinity(device))}
    except Exception:  # dask-cuda absent (or another layout): pinning by the env alone
        pass
    return options


def start_local_cluster(compile_workers: int, gpus: tuple[int, ...]) -> Any:
    """A cluster on this host: ``compile_workers`` one-thread compile workers, one worker per
    GPU in ``gpus`` (none for a compile-only cluster)."""
    distributed = require_distributed()
    import dask

    workers: dict[str, dict[str, Any]] = {}
    for i in range(compile_workers):
        options = {
            "nthreads": 1,
            "resources": {COMPILE: 1},
            "env": _worker_env(None),
            "config": WORKER_CONFIG,
            "memory_limit": 0,
            "silence_logs": logging.ERROR,
        }
        workers[f"compile-{i}"] = {"cls": distributed.Nanny, "options": options}
    for device in gpus:
        workers[f"gpu-{device}"] = {
            "cls": distributed.Nanny,
            "options": _gpu_worker_options(device),
        }
    scheduler = {
        "cls": distributed.Scheduler,
        "options": {"dashboard": False, "dashboard_address": ":0", "host": "127.0.0.1", "port": 0},
    }
    with dask.config.set({"distributed.scheduler.allowed-failures": 1}):
        cluster = distributed.SpecCluster(
            workers=workers, scheduler=scheduler, silence_logs=logging.ERROR, name="ctune"
        )
    return cluster


@dataclass
class Engine:
    """A connected client and, for a cluster started here, the cluster it owns."""

    client: Any
    cluster: Any = None
    address: str = ""
    users: int = 0
    host: str = field(default_factory=host_token)

    def resources(self) -> list[dict[str, float]]:
        """The resources each worker offers now."""
        info = self.client.scheduler_info(n_workers=-1)
        return [dict(w.get("resources") or {}) for w in info["workers"].values()]

    def offering(self, resource: str) -> dict[str, str]:
        """The workers that offer ``resource`` now: address -> name (a GPU worker the
        engine replaced keeps its name, not its address)."""
        info = self.client.scheduler_info(n_workers=-1)["workers"]
        return {
            address: str(w.get("name"))
            for address, w in info.items()
            if (w.get("resources") or {}).get(resource)
        }

    def total(self, resource: str) -> int:
        return int(sum(r.get(resource, 0) for r in self.resources()))

    def wait_for(self, resource: str, what: str, timeout_s: float = CONNECT_TIMEOUT_S) -> int:
        """Wait until some worker offers ``resource``; its total, or a one-line error."""
        import time

        deadline = time.monotonic() + timeout_s
        while True:
            total = self.total(resource)
            if total > 0:
                return total
            if time.monotonic() >= deadline:
                raise ToolchainError(
                    f"the Dask cluster at {self.address} has no worker offering {resource!r} "
                    f"after {timeout_s:g} s; start {what} with "
                    f"`dask worker {self.address} --nthreads 1 --resources {resource}=1`"
                )
            time.sleep(0.2)

    def one_host(self) -> bool:
        """Do all workers share this process's host (and so the cache by path)?"""
        tokens = self.client.run(host_token)
        return all(t == self.host for t in tokens.values())

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.close()
        if self.cluster is not None:
            with contextlib.suppress(Exception):
                self.cluster.close()


_ENGINES: dict[tuple[str, ...], Engine] = {}
_LOCK = threading.Lock()


def _key(settings: Settings) -> tuple[str, ...]:
    return (settings.executor, settings.gpus, str(settings.jobs))


def acquire(settings: Settings) -> Engine:
    """The engine for these settings, started or connected on first use (shared)."""
    with _LOCK:
        engine = _ENGINES.get(_key(settings))
        if engine is None:
            engine = _open(settings)
            _ENGINES[_key(settings)] = engine
        engine.users += 1
        return engine


def release(engine: Engine) -> None:
    """One user fewer; the last one closes the client (and a cluster started here)."""
    with _LOCK:
        engine.users -= 1
        if engine.users > 0:
            return
        for key, known in list(_ENGINES.items()):
            if known is engine:
                del _ENGINES[key]
    engine.close()


def _open(settings: Settings) -> Engine:
    distributed = require_distributed()
    choice = resolve_executor(settings)
    if choice.kind == "local":
        raise UserError("executor=local uses no engine")  # callers check uses_engine first
    if choice.kind == "address":
        try:
            client = distributed.Client(choice.address, timeout=CONNECT_TIMEOUT_S)
        except ValueError as exc:  # an address Dask cannot parse (parse_executor checks)
            raise UserError(f"executor={choice.address}: {exc}") from None
        except OSError as exc:
            raise ToolchainError(
                f"executor={choice.address}: cannot reach the Dask scheduler ({exc}); start it "
                "with `dask scheduler` or use --executor dask for a cluster on this host"
            ) from None
        return Engine(client, None, choice.address)
    jobs = settings.jobs or os.cpu_count() or 1
    cluster = start_local_cluster(jobs, resolve_gpus(settings.gpus))
    return Engine(distributed.Client(cluster), cluster, cluster.scheduler_address)


__all__ = [
    "COMPILE",
    "GPU",
    "Engine",
    "acquire",
    "count_gpus",
    "host_token",
    "release",
    "require_distributed",
    "resolve_executor",
    "resolve_gpus",
    "start_local_cluster",
]
