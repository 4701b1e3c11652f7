"""A saved replay checkpoint (``replay.obsaug``, format version 1, described in
replay/checkpoint_format.h) as bytes a test edits by field name and reseals:
both checksums (the header's and the file's: replay/checkpoint_io.h's
word-wise FNV-1a style Checksum) recomputed, so that what an edit meets is
the loader's validation after the checksums. The Python twin of
tests/replay/checkpoint_edit.h, for the pytest property tests.

    edit = CheckpointEdit.of_dir(path)
    edit.set_slot(2, "next", 7).set_env(0, "open", 1).set_header("total_frames", 99)
    edit.write_sealed(path)
"""
import os
import struct

MASK = (1 << 64) - 1
PRIME = 0x100000001B3
OFFSET = 0xCBF29CE484222325

# Field tables in file order, as checkpoint_format.h's header_fields,
# slot_fields and env_fields (struct codes; "shape3" three int64, "shape" a
# uint32 count then int64s, "dtype" a uint32 length then the name).
HEADER = [("capacity", "q"), ("frame_shape", "shape3"), ("frame_stack", "i"),
          ("action_shape", "shape"), ("action_dtype", "dtype"), ("n_step", "i"), ("gamma", "d"),
          ("prioritized", "?"), ("alpha", "d"), ("beta", "d"), ("seed", "Q"),
          ("total_frames", "q"), ("sample_calls", "Q"), ("max_priority", "d")]
SLOT = [("prev", "q"), ("next", "q"), ("reward", "f"), ("terminated", "B"), ("ended", "B")]
ENV = [("last", "q"), ("open", "B")]
DTYPE_BYTES = {"Float": 4, "Double": 8, "Long": 8, "Int": 4, "Byte": 1, "Half": 2, "BFloat16": 2}


def checksum(data: bytes) -> int:
    """replay/checkpoint_io.h's Checksum of `data`."""
    state = OFFSET
    full = len(data) // 8 * 8
    for (word,) in struct.iter_unpack("<Q", data[:full]):
        state = ((state ^ word) * PRIME) & MASK
    if full < len(data):
        word = int.from_bytes(data[full:].ljust(8, b"\0"), "little")
        state = ((state ^ word) * PRIME) & MASK
    return ((state ^ len(data)) * PRIME) & MASK


def _offsets(table):
    out, at = {}, 0
    for name, code in table:
        out[name] = (at, code)
        at += struct.calcsize("<" + code)
    return out, at


SLOT_FIELDS, SLOT_BYTES = _offsets(SLOT)   # 22 bytes
ENV_FIELDS, ENV_BYTES = _offsets(ENV)      # 9 bytes


class CheckpointEdit:
    def __init__(self, data: bytes):
        self.data = bytearray(data)
        self.header = {}    # name -> (offset, code)
        self.values = {}    # name -> value as saved
        at = 12             # magic, version
        for name, code in HEADER:
            self.header[name] = (at, code)
            if code == "shape3":
                self.values[name] = struct.unpack_from("<3q", data, at)
                at += 24
            elif code == "shape":
                (count,) = struct.unpack_from("<I", data, at)
                self.values[name] = struct.unpack_from(f"<{count}q", data, at + 4)
                at += 4 + 8 * count
            elif code == "dtype":
                (length,) = struct.unpack_from("<I", data, at)
                self.values[name] = bytes(data[at + 4:at + 4 + length]).decode()
                at += 4 + length
            else:
                (self.values[name],) = struct.unpack_from("<" + code, data, at)
                at += struct.calcsize("<" + code)
        self.header_checksum_at = at
        v = self.values
        self.slots = min(v["total_frames"], v["capacity"])
        at += 8
        self.slots_at = at
        at += self.slots * SLOT_BYTES
        self.env_count_at = at
        (self.envs,) = struct.unpack_from("<I", data, at)
        at += 4
        self.envs_at = at
        at += self.envs * ENV_BYTES
        self.priorities_at = at
        at += self.slots * 8 if v["prioritized"] else 0
        self.action_row = DTYPE_BYTES[v["action_dtype"]]
        for s in v["action_shape"]:
            self.action_row *= s
        self.actions_at = at
        at += self.slots * self.action_row
        self.frames_at = at
        c, h, w = v["frame_shape"]
        at += self.slots * c * h * w
        if at + 8 != len(data):
            raise ValueError("not a file ReplayBuffer.save wrote")

    @classmethod
    def of_dir(cls, path) -> "CheckpointEdit":
        with open(os.path.join(path, "replay.obsaug"), "rb") as f:
            return cls(f.read())

    def copy(self) -> "CheckpointEdit":
        return CheckpointEdit(bytes(self.data))

    # --- values by name ---------------------------------------------------------------

    def _get(self, at, code):
        return struct.unpack_from("<" + code, self.data, at)[0]

    def _set(self, at, code, value):
        struct.pack_into("<" + code, self.data, at, value)
        return self

    def slot_at(self, slot, name):
        return self.slots_at + slot * SLOT_BYTES + SLOT_FIELDS[name][0]

    def env_at(self, env, name):
        return self.envs_at + env * ENV_BYTES + ENV_FIELDS[name][0]

    def get_header(self, name):
        return self._get(*self.header[name])

    def set_header(self, name, value):
        return self._set(*self.header[name], value)

    def get_slot(self, slot, name):
        return self._get(self.slot_at(slot, name), SLOT_FIELDS[name][1])

    def set_slot(self, slot, name, value):
        return self._set(self.slot_at(slot, name), SLOT_FIELDS[name][1], value)

    def get_env(self, env, name):
        return self._get(self.env_at(env, name), ENV_FIELDS[name][1])

    def set_env(self, env, name, value):
        return self._set(self.env_at(env, name), ENV_FIELDS[name][1], value)

    def set_priority(self, slot, value):
        return self._set(self.priorities_at + 8 * slot, "d", value)

    def set_action_float(self, slot, element, value):
        """A float32 buffer's action element."""
        return self._set(self.actions_at + slot * self.action_row + 4 * element, "f", value)

    # --- sealing ----------------------------------------------------------------------

    def sealed(self) -> bytes:
        out = bytearray(self.data)
        at = self.header_checksum_at
        struct.pack_into("<Q", out, at, checksum(bytes(out[:at])))
        struct.pack_into("<Q", out, len(out) - 8, checksum(bytes(out[:-8])))
        return bytes(out)

    def write_sealed(self, path):
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, "replay.obsaug"), "wb") as f:
            f.write(self.sealed())
