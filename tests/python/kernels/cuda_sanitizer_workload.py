"""A short run of every CUDA op path, for compute-sanitizer (small batches):
scripts/gpu_check.sh runs it under memcheck, racecheck, synccheck and
initcheck. Not a pytest file: `python cuda_sanitizer_workload.py`, exit 1 when
a call fails."""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir,
                                os.pardir, "python"))
import obsaug  # noqa: E402,F401
from obsaug import ops as O  # noqa: E402


def main():
    dev = torch.device("cuda")
    g = torch.Generator().manual_seed(1)
    failed = 0

    def u8(*shape):
        return torch.randint(0, 256, shape, dtype=torch.uint8, generator=g).to(dev)

    # Odd sizes (planes at every 16-byte phase), and both sides of the
    # 48128-byte shared-memory edge (in place uint8 188x256 / 189x256, float32
    # 94x128 / 95x128, 160x256 / 161x256 with and without the traces; out of
    # place 256x128 with two output tiles).
    shapes = [(4, 9, 84, 84, 3), (3, 4, 84, 84, 1), (2, 6, 61, 47, 3), (2, 9, 83, 85, 3),
              (2, 2, 188, 256, 1), (2, 2, 189, 256, 1), (2, 2, 94, 128, 1), (2, 2, 95, 128, 1),
              (2, 2, 256, 128, 1), (2, 2, 160, 256, 1), (2, 2, 161, 256, 1), (1, 3, 256, 256, 3)]
    for b, sc, h, w, c in shapes:
        for dt in (torch.uint8, torch.float32):
            x = u8(b, sc, h, w).to(dt)
            pool = u8(5, c, h, w)
            cpool = u8(5, c, h - 8, w - 6)
            storage = u8(7, c, h, w).to(dt)
            index = torch.tensor([[6, 0] * (sc // c // 2) + [3] * (sc // c % 2)] * b, device=dev)
            calls = [
                ("shift+overlay", lambda: O.augment(x, pool, ops=[{"op": "shift", "pad": 4},
                                                                  {"op": "overlay", "alpha": 0.5}],
                                                    seed=1, step=2)),
                ("inplace", lambda: O.augment(x.clone(), pool, ops=[
                    {"op": "overlay", "alpha": 0.3, "alpha_max": 0.9, "per_frame": True},
                    {"op": "shift", "pad": 5, "padding": "zeros"}], seed=1, step=3, inplace=True)),
                ("crop+overlay", lambda: O.augment(x, cpool, ops=[{"op": "crop", "size": [h - 8, w - 6]},
                                                                  {"op": "overlay", "alpha": 0.5}],
                                                   seed=1, step=4)),
                ("noncontig", lambda: O.augment(x[:, :, 1:, 2:], None, ops=[{"op": "shift", "pad": 4}],
                                                seed=1, step=5)),
                ("gather", lambda: O.gather_augment(storage, index, ops=[{"op": "shift", "pad": 3}],
                                                    seed=1, step=7)),
            ]
            if dt == torch.uint8:
                calls.append(("->f32", lambda: O.augment(x, pool, ops=[{"op": "shift", "pad": 4},
                                                                       {"op": "overlay", "alpha": 0.5}],
                                                         seed=1, step=6, out_dtype=torch.float32,
                                                         scale=1 / 255, bias=-0.5)))
            for name, fn in calls:
                try:
                    fn()
                    torch.cuda.synchronize()
                except Exception as e:  # noqa: BLE001
                    failed += 1
                    print(f"FAIL {b}x{sc}x{h}x{w} {dt} {name}: {type(e).__name__}: {str(e).splitlines()[0]}")
    print(f"sanitizer workload: {failed} calls failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
