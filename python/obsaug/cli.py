"""The ``obsaug`` console command (``pip install .``; also ``python -m obsaug``).

``obsaug fetch-photos`` is handled here: it runs the project's
scripts/fetch_photos.sh (packaged in the wheel) into the user cache. Every
other subcommand (check-config, bench, preview, help) is the C++ tool,
exec'd with torch's libraries on LD_LIBRARY_PATH (the wheel's binary finds
libobsaug beside it, and torch wherever the environment has it).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from typing import List, Optional

from . import locations

__all__ = ["main", "fetch_photos"]


def fetch_photos(argv: List[str]) -> int:
    """``obsaug fetch-photos [--force] [--dest DIR]``; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="obsaug fetch-photos",
        description="Download the embedded photographs (a few dozen, from Debian packages via "
                    "apt-get download; nothing is installed) into the user cache, where a "
                    "config's data/photos source finds them. Needs apt-get and dpkg-deb.")
    parser.add_argument("--force", action="store_true", help="fetch again even when up to date")
    parser.add_argument("--dest", default=None,
                        help=f"target folder (default: {locations.photo_cache_dir() or 'none: set HOME'})")
    args = parser.parse_args(argv)
    dest = args.dest or locations.photo_cache_dir()
    if not dest:
        parser.error("neither XDG_CACHE_HOME nor HOME is set: give --dest DIR")
    command = ["bash", str(locations.fetch_script())] + (["--force"] if args.force else []) + [dest]
    return subprocess.call(command)


def main(argv: Optional[List[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["fetch-photos"]:
        return fetch_photos(args[1:])
    try:
        binary = str(locations.cli_binary())
    except FileNotFoundError as e:
        print(f"obsaug: {e}", file=sys.stderr)
        return 1
    import torch  # already loaded by the package; only its folder is needed
    torch_lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (torch_lib, env.get("LD_LIBRARY_PATH")) if p)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(binary, [binary, *args], env)
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main())
