"""Dask futures seen as ``concurrent.futures`` futures (what the driver waits on).

Cancelling one cancels the engine's task: a compile not started is dropped; one that
runs finishes into the build cache (Dask cannot stop a running task), as locally.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from typing import Any, TypeVar

T = TypeVar("T")


class EngineFuture(Future[T]):
    """Completes when the engine's task does, with ``convert`` applied to its outcome."""

    def __init__(self, task: Any, convert: Callable[[Any, BaseException | None], T]) -> None:
        super().__init__()
        self.task = task
        self._convert = convert
        task.add_done_callback(self._finish)

    def _finish(self, task: Any) -> None:
        if self.cancelled():
            return
        error: BaseException | None = None
        value: Any = None
        try:
            value = task.result()
        except BaseException as exc:  # the engine's error, judged by convert
            error = exc
        try:
            result = self._convert(value, error)
        except BaseException as exc:  # not the candidate's: the driver gets it
            self._settle(None, exc)
            return
        self._settle(result, None)

    def _settle(self, result: T | None, error: BaseException | None) -> None:
        try:
            if error is not None:
                self.set_exception(error)
            else:
                self.set_result(result)  # type: ignore[arg-type]
        except InvalidStateError:  # cancelled meanwhile
            pass

    def cancel(self) -> bool:
        cancelled = super().cancel()
        if cancelled:
            self.task.cancel()
        return cancelled


def killed_worker(error: BaseException | None) -> bool:
    """Did the engine give up because the task's workers kept dying?"""
    if error is None:
        return False
    try:
        from distributed.scheduler import KilledWorker
    except ImportError:
        return False
    return isinstance(error, KilledWorker)


__all__ = ["EngineFuture", "killed_worker"]
