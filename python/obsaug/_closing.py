"""The close protocol shared by the wrappers whose native object runs decoder
threads (``Engine``, ``DistractorPool``): ``close()``, ``closed`` and use as a
context manager that closes on exit. The wrapper keeps its native object in
``self._native``."""
from __future__ import annotations

from typing import Any, TypeVar

_Self = TypeVar("_Self", bound="Closing")


class Closing:
    _native: Any

    def close(self) -> None:
        """Stops and joins the decoder threads; idempotent. Later calls that need
        them (augment, refresh) raise RuntimeError."""
        self._native.close()

    @property
    def closed(self) -> bool:
        return self._native.closed

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
