"""Seed corpora for scripts/fuzz.sh, made from the project's own data.

fuzz_decode: a few small embedded photos (JPEG, PNG; baseline and
progressive), re-encoded small so each run is fast, plus grayscale and CMYK
JPEGs and a palette PNG with alpha. fuzz_tar: ustar, GNU long-name and pax
shards of those images. fuzz_config: the presets in configs/. fuzz_replay_checkpoint:
small replay checkpoints (uniform and prioritized, wrapped ring, parallel envs).
fuzz_replay_fields: edit scripts (tests/fuzz/fuzz_replay_fields.cpp): each base
checkpoint unedited, one edit of each kind, and sixteen edits.
fuzz_frame_record: crops of the codec tests' real frames
(tests/kernels/codecs/data) in the target's encode-first form, one per codec,
delta and intra, plus a few raw byte strings.
Usage: make_fuzz_seeds.py OUT_DIR
"""
import io
import os
import pathlib
import sys
import tarfile

import numpy as np
import torch
from PIL import Image

ROOT = pathlib.Path(__file__).resolve().parent.parent


def decode_seeds(out: pathlib.Path):
    out.mkdir(parents=True, exist_ok=True)
    photos = sorted(p for p in (ROOT / "data/photos").rglob("*") if p.suffix.lower() in
                    (".jpg", ".jpeg", ".png"))[:6]
    images = []
    for i, p in enumerate(photos):
        im = Image.open(p).convert("RGB")
        im.thumbnail((96, 96))
        images.append(im)
        for name, kwargs in (("base", {}), ("prog", {"progressive": True})):
            buf = io.BytesIO()
            im.save(buf, "JPEG", quality=80, **kwargs)
            (out / f"{i}_{name}.jpg").write_bytes(buf.getvalue())
        buf = io.BytesIO()
        im.save(buf, "PNG")
        (out / f"{i}.png").write_bytes(buf.getvalue())
    if images:
        im = images[0]
        for mode, ext, fmt in (("L", "jpg", "JPEG"), ("CMYK", "jpg", "JPEG"), ("RGBA", "png", "PNG"),
                               ("P", "png", "PNG"), ("LA", "png", "PNG")):
            buf = io.BytesIO()
            im.convert(mode).save(buf, fmt)
            (out / f"mode_{mode}.{ext}").write_bytes(buf.getvalue())
    return sorted(out.iterdir())


def tar_seeds(out: pathlib.Path, images):
    out.mkdir(parents=True, exist_ok=True)
    for fmt_name, fmt in (("ustar", tarfile.USTAR_FORMAT), ("gnu", tarfile.GNU_FORMAT),
                          ("pax", tarfile.PAX_FORMAT)):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=fmt) as tar:
            for i, p in enumerate(images[:3]):
                name = f"{'long_directory_name/' * 6 if fmt_name != 'ustar' else ''}{i}_{p.name}"
                info = tarfile.TarInfo(name)
                data = p.read_bytes()
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        (out / f"{fmt_name}.tar").write_bytes(buf.getvalue())


def config_seeds(out: pathlib.Path):
    out.mkdir(parents=True, exist_ok=True)
    for p in sorted((ROOT / "configs").glob("*.yaml")):
        (out / p.name).write_bytes(p.read_bytes())


def replay_seeds(out: pathlib.Path):
    sys.path.insert(0, str(ROOT / "python"))
    import obsaug

    out.mkdir(parents=True, exist_ok=True)
    g = torch.Generator().manual_seed(0)
    for name, kw, envs in (("uniform", {}, 1), ("prioritized", {"prioritized": True}, 1),
                           ("nstep_envs", {"n_step": 3}, 3)):
        rb = obsaug.ReplayBuffer(24, (1, 4, 4), 3, (2,), **kw)
        for t in range(40):
            frames = torch.randint(0, 256, (envs, 1, 4, 4), dtype=torch.uint8, generator=g)
            if t % 9 == 0:
                rb.add_first(frames)
            else:
                rb.add(torch.rand(envs, 2, generator=g), torch.rand(envs, generator=g), frames,
                       torch.full((envs,), t % 9 == 8))
        d = out / f"_{name}"
        rb.save(d)
        (out / f"{name}.obsaug").write_bytes((d / "replay.obsaug").read_bytes())
        (d / "replay.obsaug").unlink()
        d.rmdir()


def replay_field_seeds(out: pathlib.Path):
    """Edit scripts: byte 0 the base, then [kind][index][8 value bytes] per edit."""
    out.mkdir(parents=True, exist_ok=True)
    for base in range(5):
        (out / f"base{base}").write_bytes(bytes([base]))
        for kind in range(8):
            value = (kind * 0x0101010101010101 + 0x80 * (kind % 2)).to_bytes(8, "little")
            (out / f"base{base}_edit{kind}").write_bytes(bytes([base, kind, 3]) + value)
        many = bytes([base])  # 16 edits, one of each kind twice
        for k in range(16):
            many += bytes([k % 8, k]) + (k * 0x0102030405060708 & (2**64 - 1)).to_bytes(8, "little")
        (out / f"base{base}_many").write_bytes(many)


def frame_record_seeds(out: pathlib.Path):
    # tests/fuzz/fuzz_frame_record.cpp: flags, C, H, W, then the frame's bytes
    # (bit 2: encode first; bit 0: against a reference; bit 1: refresh the
    # checksum; bits 3..5: the codec).
    out.mkdir(parents=True, exist_ok=True)
    for path in sorted((ROOT / "tests/kernels/codecs/data").glob("*.npy")):
        frames = np.load(path)
        c = frames.shape[1]
        crop = frames[1, :, 20:44, 30:62]  # [C, 24, 32]
        for codec in range(8):
            for delta in (0, 1):
                flags = 4 | 2 | delta | (codec << 3)
                head = bytes([flags, c - 1, 23, 31])
                (out / f"{path.stem}_{codec}_{delta}").write_bytes(head + crop.tobytes())
    for k, blob in enumerate((b"\x00\x00\x00\x00", b"\x02" + bytes(3) + b"\x01" * 40)):
        (out / f"raw_{k}").write_bytes(blob)


def main():
    out = pathlib.Path(sys.argv[1])
    images = decode_seeds(out / "fuzz_decode")
    tar_seeds(out / "fuzz_tar", images)
    config_seeds(out / "fuzz_config")
    replay_seeds(out / "fuzz_replay_checkpoint")
    replay_field_seeds(out / "fuzz_replay_fields")
    frame_record_seeds(out / "fuzz_frame_record")


if __name__ == "__main__":
    main()
