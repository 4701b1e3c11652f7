"""Soak run: augmentation and replay sampling from two threads while
the distractor pool refreshes at full speed, checking what a long RL run needs.

Thread A augments [256, 9, 84, 84] uint8 batches through the engine; thread B
adds steps of 4 parallel envs to a prioritized ReplayBuffer (the ring wraps
many times), samples 256 with fused augmentation through the same engine and
updates priorities. Every window it prints both throughputs, resident memory
and the pool's counters. It fails (exit 1) when
  - resident memory grows by more than --max-drift-mib after the first window,
  - the pool reports failed decodes or a thread raises,
  - a window's throughput falls below --min-ratio of the first window's.
Usage: .venv/bin/python scripts/soak.py --seconds 120
"""
import argparse
import pathlib
import sys
import threading
import time

import torch

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))
import obsaug  # noqa: E402


def rss_mib() -> float:
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=120)
    ap.add_argument("--window", type=float, default=10)
    ap.add_argument("--capacity", type=int, default=6000)
    ap.add_argument("--max-drift-mib", type=float, default=64)
    ap.add_argument("--min-ratio", type=float, default=0.4)
    args = ap.parse_args()
    torch.set_num_threads(1)

    config = {"device": "cpu", "seed": 7, "frames": {"stack": 3, "channels": 3, "height": 84, "width": 84},
              "pipeline": [{"op": "shift", "pad": 4}, {"op": "overlay", "alpha": 0.5}],
              "pool": {"size": 256, "sources": [str(ROOT / "data/photos")],
                       "refresh": {"threads": 1, "max_per_second": 0, "mode": "async"}}}
    eng = obsaug.Engine(config)
    rb = obsaug.ReplayBuffer(args.capacity, (3, 84, 84), 3, (6,), n_step=3, prioritized=True, seed=3)
    envs = 4
    g = torch.Generator().manual_seed(0)
    frames = torch.randint(0, 256, (64, envs, 3, 84, 84), dtype=torch.uint8, generator=g)
    rb.add_first(frames[0])
    counts = {"augment": 0, "replay": 0}
    errors = []
    stop = threading.Event()

    def augmenting():
        obs = torch.randint(0, 256, (256, 9, 84, 84), dtype=torch.uint8, generator=g)
        try:
            while not stop.is_set():
                eng.augment_(obs)
                counts["augment"] += 256
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(f"augment thread: {e!r}")

    def replaying():
        t = 1
        try:
            while not stop.is_set():
                for _ in range(8 if rb.num_valid >= 512 else 200):
                    ended = torch.tensor([(t + e) % 250 == 0 for e in range(envs)])
                    rb.add(torch.rand(envs, 6), torch.rand(envs), frames[t % 64], ended)
                    if ended.any():
                        rb.add_first(frames[(t + 1) % 64][ended], env=ended.nonzero().flatten())
                    t += 1
                batch = rb.sample(256, augment=eng)
                rb.update_priorities(batch["indices"], batch["reward"].abs() + 0.01)
                counts["replay"] += 256
        except Exception as e:  # noqa: BLE001
            errors.append(f"replay thread: {e!r}")

    threads = [threading.Thread(target=augmenting), threading.Thread(target=replaying)]
    for th in threads:
        th.start()
    windows = []
    start = time.perf_counter()
    last = dict(counts)
    failures = []
    print(f"{'t':>6} {'augment/s':>10} {'replay/s':>10} {'rss MiB':>8} {'decoded':>8} {'failed':>6} {'frames':>9}")
    while time.perf_counter() - start < args.seconds and not errors:
        time.sleep(args.window)
        now = dict(counts)
        rates = {k: (now[k] - last[k]) / args.window for k in now}
        last = now
        stats = eng.stats()
        windows.append((rates, rss_mib()))
        print(f"{time.perf_counter() - start:6.0f} {rates['augment']:10.0f} {rates['replay']:10.0f} "
              f"{windows[-1][1]:8.0f} {stats['pool_decoded']:8d} {stats['pool_failed']:6d} "
              f"{rb.total_frames:9d}", flush=True)
    stop.set()
    for th in threads:
        th.join()
    eng.close()
    failures += errors
    if len(windows) >= 2:
        drift = max(r for _, r in windows[1:]) - windows[0][1]
        print(f"resident memory: {windows[0][1]:.0f} MiB after the first window, drift {drift:+.0f} MiB "
              f"(limit {args.max_drift_mib:.0f}); ring wrapped {rb.total_frames / rb.capacity:.1f} times")
        if drift > args.max_drift_mib:
            failures.append(f"resident memory grew by {drift:.0f} MiB")
        for key in ("augment", "replay"):
            first = windows[0][0][key]
            worst = min(w[0][key] for w in windows[1:])
            print(f"{key}: first window {first:.0f}/s, slowest later window {worst:.0f}/s")
            if first > 0 and worst < args.min_ratio * first:
                failures.append(f"{key} throughput fell to {worst / first:.2f} of the first window")
    else:
        failures.append("the soak ran less than two windows")
    stats = eng.stats()
    if stats["pool_failed"]:
        failures.append(f"{stats['pool_failed']} pool decodes failed")
    print(f"pool: decoded {stats['pool_decoded']}, failed {stats['pool_failed']}, "
          f"uploaded {stats['pool_uploaded']}")
    for f in failures:
        print("FAIL:", f)
    print("soak:", "FAIL" if failures else "PASS", f"({time.perf_counter() - start:.0f} s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
