"""obsaug.DistractorPool: decoded photographs for the overlay op, kept fresh.

``images`` is the ``[size, channels, H, W]`` uint8 tensor on ``device`` that
``obsaug.ops.overlay`` / ``augment`` take as ``pool``. Call ``refresh()``
before each augment that reads it, on the augment thread (and, on CUDA, with
the augment stream current): it uploads what the decoder threads staged
(``mode="async"``) or decodes ``per_call`` images from the seeded file order
(``mode="sync"``, bit-reproducible). Only that call changes ``images``.

Sources are directories (searched recursively), ``.txt`` lists of paths,
WebDataset ``.tar`` shards or image files (JPEG, PNG). A file that fails to
decode is skipped and counted in ``stats()``. ``rank`` / ``world_size`` give
this process a disjoint share of the files.

``state_dict()`` / ``load_state_dict()`` save and restore the pool: its
refresh cursor, the serial and image checksum of each slot, and the listing
the serials refer to; loading re-decodes every slot (``size`` decodes), so a
sync-mode pool continues bit-exactly, and refuses sources whose files changed. The object is
not thread-safe: one thread refreshes, restores and closes it. Use it as a
context manager, or call ``close()``, to stop the decoder threads.
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Sequence, Tuple, Union

import torch

from . import _C
from ._closing import Closing
from .ops import _INT32_MAX, _bool_arg, _float_arg, _is_int, _rank_args, _uint64_arg, _unwrapped

__all__ = ["DistractorPool"]

_Sources = Union[str, "os.PathLike[str]", Sequence[Union[str, "os.PathLike[str]"]]]


def _int_option(name: str, value: Any, lo: int, hi: int = _INT32_MAX) -> int:
    """An int argument (also a numpy or 0-dim torch integer; not a bool: TypeError) in
    lo..hi (ValueError), each naming it."""
    value = _unwrapped(value)
    if not _is_int(value):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    value = int(value)
    if not lo <= value <= hi:
        raise ValueError(f"{name} must be in {lo}..{hi}, got {value}")
    return value


def _image_size(value: Any) -> Tuple[int, int]:
    """``H`` or ``(H, W)``, each side an int in 1..2**31-1."""
    value = _unwrapped(value)
    if _is_int(value):
        sides = (value, value)
    elif isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        if len(value) != 2:
            raise ValueError(f"image_size must be an int or (height, width), got {len(value)} "
                             "values")
        sides = tuple(_unwrapped(side) for side in value)
        if not all(_is_int(side) for side in sides):
            raise TypeError("image_size must be an int or (height, width) of ints, got "
                            f"({', '.join(type(side).__name__ for side in sides)})")
    else:
        raise TypeError("image_size must be an int or (height, width) of ints, got "
                        f"{type(value).__name__}")
    height, width = (int(side) for side in sides)
    if not (1 <= height <= _INT32_MAX and 1 <= width <= _INT32_MAX):
        raise ValueError(f"image_size must be in 1..{_INT32_MAX} per side, got {height}x{width}")
    return height, width


_STATE_KEYS = ("next_serial", "next_stamp", "calls", "slot_serials", "slot_checksums",
               "num_files", "listing_fingerprint")


class DistractorPool(Closing):
    """Decoded distractor photographs for the overlay op, refreshed in the background."""

    def __init__(self, sources: _Sources, size: int = 1024,
                 image_size: Union[int, Tuple[int, int]] = (84, 84), channels: int = 3,
                 device: Union[str, torch.device] = "cpu", threads: int = 2,
                 mode: str = "async", max_per_second: float = 0.0, per_call: int = 8,
                 seed: int = 0, rank: int = 0, world_size: int = 1, progress: bool = True,
                 worker_nice: int = 10):
        """Lists the sources and blocks until all ``size`` slots hold a decoded image.

        sources: a path or a list of paths (relative ones are taken against the working
        directory now, and kept absolute). image_size: ``H`` or ``(H, W)`` of each
        slot (random-resized-cropped to it). channels: 3 (RGB) or 1 (grayscale).
        threads: fill threads (0 fills with one), and the decoder threads of
        mode="async" (0: none, the pool keeps its fill).
        max_per_second: async decode rate cap over all threads: 0 (none) or >= 0.001.
        When every file fails (the folder vanished), the decoder threads back off,
        sleeping up to a second between tries, until one decodes again.
        per_call: images one ``refresh()`` decodes in mode="sync". seed: file order,
        crops and flips. progress: a progress line during the fill (on a terminal).
        worker_nice: how much nicer than the caller the decoder threads run (Linux).

        Raises RuntimeError naming the path when a source holds no image or no
        decodable one; TypeError for an option of the wrong type (a float ``size``, a
        bool ``seed``) and ValueError for a bad value (mode, channels, size, a
        ``seed`` outside [0, 2**64), ``rank`` outside [0, world_size), a sync-mode
        ``per_call`` above ``size``), each naming the option.
        """
        if isinstance(device, torch.device):
            device = str(device)
        if not isinstance(device, str):
            raise TypeError(f"device must be a str or torch.device, got {type(device).__name__}")
        if not isinstance(mode, str):
            raise TypeError(f'mode must be a str ("async" or "sync"), got {type(mode).__name__}')
        size = _int_option("size", size, 1)
        image_size = _image_size(image_size)
        channels = _unwrapped(channels)
        if not _is_int(channels):
            raise TypeError(f"channels must be an int, got {type(channels).__name__}")
        if channels not in (1, 3):  # as DistractorPool::validate words it
            raise ValueError(f"channels must be 1 or 3, got {channels}")
        threads = _int_option("threads", threads, 0)
        per_call = _int_option("per_call", per_call, 0)
        worker_nice = _int_option("worker_nice", worker_nice, 0)
        seed = _uint64_arg("seed", _unwrapped(seed))
        rank, world_size = _rank_args(rank, world_size)
        max_per_second = _float_arg("max_per_second", max_per_second)
        progress = _bool_arg("progress", progress)
        # mode, max_per_second's range and per_call <= size in sync mode are checked
        # natively (DistractorPool::validate), in the config loader's words.
        self._native = _C.DistractorPool(
            sources, size=size, image_size=image_size, channels=int(channels), device=device,
            threads=threads, mode=mode, max_per_second=max_per_second,
            per_call=per_call, seed=seed, rank=rank, world_size=world_size,
            progress=progress, worker_nice=worker_nice)

    @property
    def images(self) -> torch.Tensor:
        """The ``[size, channels, H, W]`` uint8 pool on ``device`` (changes only in ``refresh``)."""
        return self._native.images

    def refresh(self) -> None:
        """Uploads the staged images (async) or decodes ``per_call`` images (sync).

        Raises RuntimeError after ``close()``, and re-raises (once) an unexpected
        error of a decoder thread.
        """
        self._native.refresh()

    def stats(self) -> Dict[str, Any]:
        """decoded, failed, uploaded, decode_rate, mean_age_calls, queue_depth, calls and
        first_failures (``{"path", "message"}`` of inputs that failed: the first 5 found
        when listing, .txt entries naming no file and truncated tar shards, then the first 5
        files that did not read or decode)."""
        return self._native.stats()

    @property
    def num_files(self) -> int:
        """How many files this rank's share of the sources holds."""
        return self._native.num_files

    @property
    def cursor(self) -> Dict[str, int]:
        """Where the refresh stands: ``{"next_serial", "next_stamp", "calls"}``.

        Setting it moves only the cursor (the content stays); ``load_state_dict``
        restores both.
        """
        return self._native.cursor

    @cursor.setter
    def cursor(self, value: Mapping[str, int]) -> None:
        self._native.cursor = dict(value)

    def slot_serials(self) -> List[int]:
        """The serial (position in the seeded file order) of the image each slot holds."""
        return list(self._native.slot_serials())

    def state_dict(self) -> Dict[str, Any]:
        """The cursor's ``next_serial``, ``next_stamp``, ``calls``; each slot's
        ``slot_serials`` and ``slot_checksums``; and the listing they refer to:
        ``num_files`` and ``listing_fingerprint`` (a hash of the files' names relative
        to their source, tar members and sizes)."""
        return self._native.state()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Makes the pool what it was when ``state`` was taken (by a pool with the same
        options and sources): re-decodes every slot's image, then sets the cursor.

        All or nothing: raises ValueError for a state without the keys of
        ``state_dict()`` or with a different number of slots; RuntimeError when the
        sources list other files than when the state was taken (naming the file counts,
        or the fingerprints when only names or sizes differ), and naming the slot and
        file when an image no longer decodes or decodes to another image (the pool is
        then unchanged).
        """
        if not isinstance(state, Mapping):
            raise TypeError(f"state must be a mapping (from state_dict()), got {type(state).__name__}")
        missing = [key for key in _STATE_KEYS if key not in state]
        if missing:
            raise ValueError(f"state is missing {missing} (expected the keys of "
                             f"DistractorPool.state_dict(): {', '.join(_STATE_KEYS)}; a state "
                             f"saved before slot_checksums, num_files and listing_fingerprint "
                             f"existed cannot be restored exactly: take a new one)")
        native = {key: int(state[key]) for key in ("next_serial", "next_stamp", "calls",
                                                   "num_files", "listing_fingerprint")}
        for key in ("slot_serials", "slot_checksums"):
            native[key] = [int(v) for v in state[key]]
        self._native.restore(native)

    def __repr__(self) -> str:
        return repr(self._native)
