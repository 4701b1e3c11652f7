"""The one timing and reporting harness of every benchmark script.

Timing (bench_ops, bench_side_by_side, bench_replay):
  Method            one timed callable (key, label, free-form ``info``); its
                    calls per measurement (``iters``) and measured seconds
                    per call (``times``, one per round)
  measure(m, n)     seconds per call over n back-to-back calls; CUDA: CUDA
                    events on the current stream; ``m.prepare(n)`` (if any)
                    runs first, untimed
  calibrate(m)      warm-up (at most ``warmup`` calls, fewer once
                    ``warmup_budget`` seconds are spent), then the calls per
                    measurement that make one measurement last ~min_time
  run_rounds(ms)    calibrate every method, then ``rounds`` rounds that measure
                    each method once, the order rotated per round (rotated())
                    so machine noise hits all methods alike
  median(m), iqr(times), percentile(values, q), latencies(fn, n)

Reporting (every script):
  environment(**extra)  the run's record: command, date, host, git commit,
                        CPU, CPU count, torch threads and version, CUDA / GPU,
                        load average, obsaug's origin; print_header(env)
                        prints its first lines; start_with_kornia(kornia,
                        devices) begins the op benchmarks, finish(rows, ...)
                        ends them
  parse_args(p, argv, quick_help)   --quick, --seed, --json, then parse
  md_row, md_rule, print_md_table   markdown tables
  print_grouped_table               fixed-width tables, a blank line per group
  usable_device(name, obsaug)       the device, or None with why it is skipped
  write_json(path, obj)             the JSON file (parent folders created)

Only timing and reporting live here; the re-implementations of upstream code
the scripts compare against live in baselines.py.
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from typing import Callable, Dict, List, Optional, Sequence

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))


def import_obsaug():
    """``import obsaug``, from the checkout's python/ when it is not on the path."""
    try:
        import obsaug
    except ImportError:
        sys.path.insert(0, os.path.join(ROOT, "python"))
        import obsaug
    return obsaug


# --------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------

def sync(device) -> None:
    """Waits for the device's queued work (a no-op on the CPU or for device None)."""
    if device is not None and getattr(device, "type", str(device)) == "cuda":
        import torch
        torch.cuda.synchronize(device)


class Method:
    """One timed callable. ``prepare(n)``, if given, runs untimed before each
    measurement of n calls (e.g. to stage n inputs); ``fixed_iters`` (slow
    methods) replaces calibration: one untimed call, then that many calls per
    measurement; ``max_rounds`` caps
    the rounds measured; ``info`` holds whatever the script reports with it."""

    def __init__(self, key: str, fn: Callable[[], object], label: Optional[str] = None, *,
                 prepare: Optional[Callable[[int], None]] = None, max_iters: int = 100000,
                 max_rounds: int = 1000, fixed_iters: Optional[int] = None, **info):
        self.key, self.fn, self.label = key, fn, label if label is not None else key
        self.prepare, self.max_iters, self.max_rounds = prepare, max_iters, max_rounds
        self.fixed_iters = fixed_iters
        self.info = info
        self.iters = 1
        self.times: List[float] = []


def measure(m: Method, iters: int, device=None) -> float:
    """Seconds per call of ``m.fn`` over ``iters`` back-to-back calls."""
    if m.prepare is not None:
        m.prepare(iters)
    fn = m.fn
    if device is not None and getattr(device, "type", None) == "cuda":
        import torch
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(device)
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / iters
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - t0) / iters


def calibrate(m: Method, device=None, warmup: int = 3, min_time: float = 0.04,
              warmup_budget: float = 0.3) -> None:
    """Warms ``m`` up and sets ``m.iters`` so that one measurement lasts ~min_time.
    A method with fixed_iters (a slow one) gets one untimed call, so that its first
    round is not its cold start."""
    if m.fixed_iters:
        measure(m, 1, device)
        m.iters = m.fixed_iters
        return
    t0 = time.perf_counter()
    for _ in range(warmup):
        measure(m, 1, device)
        if time.perf_counter() - t0 > warmup_budget:
            break
    sync(device)
    per_call = measure(m, 1, device)
    if per_call < min_time / 4:  # one call is too short to time well: time a few
        per_call = measure(m, max(1, min(16, int(min_time / 4 / max(per_call, 1e-7)))), device)
    m.iters = int(min(m.max_iters, max(1, round(min_time / max(per_call, 1e-7)))))


def rotated(items: Sequence, r: int) -> list:
    """``items`` starting at position r (mod len): round r's order."""
    items = list(items)
    k = r % len(items) if items else 0
    return items[k:] + items[:k]


def run_rounds(methods: List[Method], rounds: int, device=None, warmup: int = 3,
               min_time: float = 0.04, warmup_budget: float = 0.3) -> None:
    """Calibrates every method, then measures each once per round in rotated order."""
    for m in methods:
        calibrate(m, device, warmup, min_time, warmup_budget)
    for r in range(rounds):
        for m in rotated(methods, r):
            if len(m.times) < m.max_rounds:
                m.times.append(measure(m, m.iters, device))


def median(m: Optional[Method]) -> Optional[float]:
    """The median seconds per call over the rounds (None when not measured)."""
    return statistics.median(m.times) if m is not None and m.times else None


def iqr(times: Sequence[float]) -> float:
    """The interquartile range (the full range below 4 values)."""
    if len(times) < 4:
        return max(times) - min(times)
    q = statistics.quantiles(times, n=4)
    return q[2] - q[0]


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def latencies(fn: Callable[[int], object], calls: int, device=None) -> List[float]:
    """Seconds of each of ``calls`` calls fn(i), each followed by a device sync
    (latency, not throughput)."""
    times = []
    for i in range(calls):
        start = time.perf_counter()
        fn(i)
        sync(device)
        times.append(time.perf_counter() - start)
    return times


# --------------------------------------------------------------------------
# The run's environment
# --------------------------------------------------------------------------

def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "?")
    except OSError:
        return platform.processor() or platform.machine()


def git_describe(root: str = ROOT) -> Optional[str]:
    try:
        return subprocess.run(["git", "-C", root, "describe", "--always", "--dirty"],
                              capture_output=True, text=True, timeout=10).stdout.strip() or None
    except Exception:  # noqa: BLE001
        return None


def loadavg() -> Optional[tuple]:
    return os.getloadavg() if hasattr(os, "getloadavg") else None


def loadavg_str(load: Optional[Sequence[float]]) -> str:
    return " ".join(f"{v:.2f}" for v in load) if load else "?"


def environment(**extra) -> Dict:
    """The record every benchmark prints first and writes into its JSON:
    command, date, host, git commit, CPU, CPU count, torch version and threads,
    CUDA and GPU, load average at start, where obsaug was imported from (when
    it was), then ``extra``."""
    env = {
        "command": " ".join(shlex.quote(a) for a in [sys.executable] + sys.argv),
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "host": platform.node(), "python": platform.python_version(),
        "git": git_describe(), "cpu": cpu_model(), "cpu_count": os.cpu_count(),
        "loadavg_start": loadavg(),
    }
    torch = sys.modules.get("torch")
    if torch is not None:
        env.update({"torch": torch.__version__, "torch_cuda": torch.version.cuda,
                    "threads": torch.get_num_threads(),
                    "interop_threads": torch.get_num_interop_threads()})
        if torch.cuda.is_available():
            env["gpu"] = torch.cuda.get_device_name(0)
    obsaug = sys.modules.get("obsaug")
    if obsaug is not None:
        env.update({"obsaug": getattr(obsaug, "__version__", None),
                    "obsaug_file": getattr(obsaug, "__file__", None),
                    "obsaug_built_with_cuda": bool(getattr(obsaug, "built_with_cuda", False))})
    env.update(extra)
    return env


def devices_or_all(requested) -> List[str]:
    """The devices a run asked for, else cpu and (when present) cuda."""
    import torch
    return requested or (["cpu"] + (["cuda"] if torch.cuda.is_available() else []))


def usable_device(name: str, obsaug_module, select: bool = False):
    """torch.device(name), or None (the reason printed) for a CUDA device when
    torch sees no GPU or obsaug was built without CUDA; with select, a CUDA
    device gets its index (the current one when none) and becomes current."""
    import torch
    device = torch.device(name)
    if device.type != "cuda":
        return device
    if not torch.cuda.is_available():
        print(f"skipping {name}: torch.cuda.is_available() is False")
        return None
    if not getattr(obsaug_module, "built_with_cuda", False):
        print(f"skipping {name}: obsaug was built without CUDA")
        return None
    if select:
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        torch.cuda.set_device(device)
    return device


def start_with_kornia(kornia_module, requested_devices) -> tuple:
    """How the op benchmarks that compare against kornia begin: the devices
    asked for (devices_or_all) and environment() with kornia's version, its
    header printed."""
    env = environment(kornia=getattr(kornia_module, "__version__", None))
    print_header(env)
    return devices_or_all(requested_devices), env


def parse_args(parser, argv, quick_help: Optional[str] = None):
    """Adds the arguments the benchmarks end with, --quick (when quick_help is
    given, with that help), --seed and --json, then parses argv."""
    if quick_help is not None:
        parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="also write the results to this JSON file")
    return parser.parse_args(argv)


def finish(rows: List[Dict], env: Dict, t_start: float, json_path: Optional[str],
           *reports: Callable[[List[Dict]], None]) -> int:
    """How the op benchmarks end: 1 when nothing was measured, else each
    report(rows) (tables, summary), the wall time since t_start and, with a
    json_path, the JSON file {environment, results}; 0."""
    if not rows:
        print("nothing was measured")
        return 1
    for report in reports:
        report(rows)
    print(f"\n(wall time {time.perf_counter() - t_start:.0f} s)")
    if json_path:
        write_json(json_path, {"environment": env, "results": rows})
    return 0


def print_header(env: Dict) -> None:
    """command / date, host, git / machine and torch: the first lines of every run."""
    print(f"command: {env['command']}")
    print(f"date: {env['date']}  host: {env['host']}  git: {env['git']}  "
          f"load average at start: {loadavg_str(env.get('loadavg_start'))}")
    line = f"cpu: {env['cpu']}, {env['cpu_count']} cpus"
    if "torch" in env:
        line += (f"; torch {env['torch']} (cuda {env['torch_cuda']}), threads {env['threads']}, "
                 f"interop {env['interop_threads']}")
    if "gpu" in env:
        line += f"; gpu: {env['gpu']}"
    print(line)
    if env.get("obsaug_file"):
        print(f"obsaug {env['obsaug']} from {env['obsaug_file']} "
              f"(built with CUDA: {env['obsaug_built_with_cuda']})")


# --------------------------------------------------------------------------
# Tables and JSON
# --------------------------------------------------------------------------

def md_row(cells) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def md_rule(align: str) -> str:
    """'l' / 'r' per column: |---| or |---:|."""
    return "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|"


def print_grouped_table(head: str, rows, group: Callable[[Dict], object],
                        line: Callable[[Dict], str]) -> None:
    """A fixed-width table: head, a rule of dashes, then line(r) per row, a blank
    line wherever group(r) changes."""
    print(head)
    print("-" * len(head))
    last = None
    for r in rows:
        g = group(r)
        if last is not None and g != last:
            print()
        last = g
        print(line(r))


def print_md_table(header, align: str, rows) -> None:
    print(md_row(header))
    print(md_rule(align))
    for r in rows:
        print(md_row(r))


def write_json(path: str, obj) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(obj, f, indent=1)
    print(f"wrote {path}")
