"""Where obsaug finds its files: the presets by name, the embedded photographs,
the photo fetch script and the packaged command-line tool.

This module knows the two layouts of the package (installed from a wheel, or
python/obsaug/ in a checkout); the lookup orders themselves are C++
(engine/locations.h), shared with the config loader and the CLI:

- ``find_config(name_or_path)``: an existing file or any text with a ``/``,
  else a preset name (``"drq_shift"`` or ``"drq_shift.yaml"``) in
  :func:`preset_dirs` (a folder of that name in the working directory does
  not hide the preset); an unknown name raises ValueError listing the presets.
- ``embedded_photos()``: ``$OBSAUG_PHOTOS`` (which must exist when set), else
  the user cache :func:`photo_cache_dir` that ``obsaug fetch-photos`` fills,
  else ``./data/photos``, else the checkout's ``data/photos``; with none,
  ValueError naming ``obsaug fetch-photos`` and ``OBSAUG_PHOTOS``. A config's
  ``pool.sources`` entry ``data/photos`` resolves the same way.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import List, Optional, Union

from . import _C

__all__ = ["preset_dirs", "preset_names", "find_config", "photo_cache_dir", "checkout_root",
           "embedded_photos", "fetch_script", "cli_binary"]

_PACKAGE = Path(__file__).resolve().parent
# python/obsaug/ -> the checkout root; only meaningful when the package is not installed.
_CHECKOUT = _PACKAGE.parents[1]


def _first_existing(*candidates: Path) -> Optional[Path]:
    return next((path for path in candidates if path.exists()), None)


def preset_dirs() -> List[str]:
    """The folders of the presets: the package's configs/ (a wheel), the checkout's configs/."""
    return [str(path) for path in (_PACKAGE / "configs", _CHECKOUT / "configs") if path.is_dir()]


def preset_names() -> List[str]:
    """The names ``obsaug.Engine(name)`` and ``obsaug check-config NAME`` accept."""
    return list(_C.preset_names(preset_dirs()))


def find_config(name_or_path: Union[str, "os.PathLike[str]"]) -> str:
    """The config file a path or a preset name refers to."""
    return _C.find_config(os.fspath(name_or_path), preset_dirs())


def photo_cache_dir() -> str:
    """The user cache folder of the embedded photographs (``obsaug fetch-photos``)."""
    return _C.photo_cache_dir()


def checkout_root() -> Optional[str]:
    """The repository checkout this package lies in (python/obsaug/ of it), or None
    when it is installed (a wheel): a dict config's fallback for relative sources."""
    return str(_CHECKOUT) if (_CHECKOUT / "configs" / "default.yaml").is_file() else None


def embedded_photos() -> str:
    """The folder of the embedded photographs, as a config's ``data/photos`` finds it
    from the working directory (absolute)."""
    return _C.find_embedded_photos([os.getcwd()] + [root for root in [checkout_root()] if root])


def fetch_script() -> Path:
    """scripts/fetch_photos.sh: packaged in a wheel, else the checkout's."""
    script = _first_existing(_PACKAGE / "scripts" / "fetch_photos.sh",
                             _CHECKOUT / "scripts" / "fetch_photos.sh")
    if script is None:
        raise FileNotFoundError(f"fetch_photos.sh is neither in {_PACKAGE / 'scripts'} nor in "
                                f"{_CHECKOUT / 'scripts'}; reinstall obsaug (pip install .)")
    return script


def cli_binary() -> Path:
    """The C++ command-line tool: obsaug/bin/obsaug in a wheel, build/tools/obsaug in a
    checkout (scripts/build.sh)."""
    binary = _first_existing(_PACKAGE / "bin" / "obsaug", _CHECKOUT / "build" / "tools" / "obsaug")
    if binary is None:
        raise FileNotFoundError(
            f"the obsaug command-line tool is neither in {_PACKAGE / 'bin'} nor in "
            f"{_CHECKOUT / 'build' / 'tools'}: it is built only with the Engine and libpng "
            "(pip install . or scripts/build.sh)")
    return binary
