"""Reading a file a user's folder holds (a sharded checkpoint's manifest), bounded,
as files/bounded_file.h reads configs, lists and checkpoints natively: opened
without blocking (a FIFO never waits for a writer), refused unless it is a regular
file, and refused when larger than its cap, before anything is read."""
import os
import stat

_KINDS = [(stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket")]


def read_regular_file(path: str, max_bytes: int, what: str) -> bytes:
    """The bytes of regular file `path`, at most `max_bytes` of them. OSError
    (FileNotFoundError, ...) when it cannot be opened; ValueError "PATH: is a FIFO,
    not a regular file" or "PATH: WHAT of N bytes, more than the limit of M"."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = next((name for test, name in _KINDS if test(st.st_mode)), "a special file")
            raise ValueError(f"{path}: is {kind}, not a regular file")
        if st.st_size > max_bytes:
            raise ValueError(f"{path}: {what} of {st.st_size} bytes, more than the limit of "
                             f"{max_bytes}")
        os.set_blocking(fd, True)
        chunks, left = [], st.st_size  # up to the size at open: a growing file stops there
        while left > 0:
            chunk = os.read(fd, left)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
