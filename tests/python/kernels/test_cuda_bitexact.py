"""CPU vs CUDA, bit for bit (DESIGN.md sections 3 and 3a), on large random batches:
every op of both families, uint8 and float32, in place / out of place / float output, odd
frame sizes and both sides of the shared-memory edges of the kernel
(48128 bytes of dynamic shared memory: kCudaSharedBytes), non-contiguous
input, determinism, a side stream, a CUDA graph capture and torch.compile.
scripts/gpu_check.sh runs this file first. Skips without a CUDA GPU.

A float32 result that is not bit-exact but within FLOAT_TOL of the CPU's
(each side within 1e-4 of float64 math, DESIGN.md section 3) is a warning,
not a failure, for the first family's cases; the second family's cases
(section 3a) need equal values."""
import warnings

import pytest
import torch

import obsaug

O = obsaug.ops
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

SEED = (1 << 63) + 12345  # exercises both key words
STEP = (1 << 40) + 7      # and both step words
FLOAT_TOL = 2e-4
SO = [{"op": "shift", "pad": 4}, {"op": "overlay", "alpha": 0.5}]


def rnd_u8(gen, *shape):
    return torch.randint(0, 256, shape, dtype=torch.uint8, generator=gen)


def difference(name, cpu, gpu, float_tol=FLOAT_TOL):
    """None when equal bit for bit (or a float32 result within float_tol, with a
    warning); else a one-line description."""
    gpu = gpu.cpu()
    if cpu.shape != gpu.shape or cpu.dtype != gpu.dtype:
        return f"{name}: cpu {tuple(cpu.shape)} {cpu.dtype} vs cuda {tuple(gpu.shape)} {gpu.dtype}"
    bits = (lambda t: t.contiguous().view(torch.int32)) if cpu.dtype == torch.float32 else (lambda t: t)
    if torch.equal(bits(cpu), bits(gpu)):
        return None
    diff = (cpu.double() - gpu.double()).abs()
    if cpu.dtype == torch.float32 and not (torch.isnan(cpu) | torch.isnan(gpu)).any() \
            and diff.max().item() <= float_tol:
        if torch.equal(cpu, gpu):  # -0 == +0: equal values (section 3a)
            return None
        warnings.warn(f"{name}: float32 not bit-exact, {int((cpu != gpu).sum())} values differ, "
                      f"max |diff| {diff.max().item():.3g} <= {float_tol}")
        return None
    bad = (bits(cpu) != bits(gpu)).nonzero()
    first = tuple(bad[0].tolist())
    return (f"{name} {tuple(cpu.shape)} {cpu.dtype}: {bad.shape[0]} of {cpu.numel()} differ, "
            f"max |diff| {diff.max().item():.4g}, first at {list(first)}: "
            f"cpu {cpu[first].item()} cuda {gpu[first].item()}")


def run_case(failures, name, fn, obs, pool, float_tol=FLOAT_TOL):
    """fn(obs, pool) on the CPU and on CUDA (inputs copied), then compared."""
    want = fn(obs.clone(), pool)
    got = fn(obs.cuda(), None if pool is None else pool.cuda())
    torch.cuda.synchronize()
    failure = difference(name, want, got, float_tol)
    if failure:
        failures.append(failure)


def pipelines(h, w):
    """(label, ops, frame size at which overlay runs, keeps the size)."""
    ch, cw = max(1, h - 16), max(1, w - 12)
    return [
        ("shift4", [{"op": "shift", "pad": 4}], None, True),
        ("shift9-zeros", [{"op": "shift", "pad": 9, "padding": "zeros"}], None, True),
        ("crop", [{"op": "crop", "size": [ch, cw]}], None, False),
        ("crop-center", [{"op": "crop", "size": [ch, cw], "center": True}], None, False),
        ("overlay.5", [{"op": "overlay", "alpha": 0.5}], (h, w), True),
        ("overlay.3-.8", [{"op": "overlay", "alpha": 0.3, "alpha_max": 0.8}], (h, w), True),
        ("overlay-perframe", [{"op": "overlay", "alpha": 0.25, "alpha_max": 1.0, "per_frame": True}],
         (h, w), True),
        ("overlay0+1", [{"op": "overlay", "alpha": 0.0}, {"op": "overlay", "alpha": 1.0}], (h, w), True),
        ("shift+overlay", [{"op": "shift", "pad": 4}, {"op": "overlay", "alpha": 0.5}], (h, w), True),
        ("overlay+shift", [{"op": "overlay", "alpha": 0.4}, {"op": "shift", "pad": 4}], (h, w), True),
        ("crop+overlay", [{"op": "crop", "size": [ch, cw]}, {"op": "overlay", "alpha": 0.5}], (ch, cw),
         False),
        ("shift+crop+overlay", [{"op": "shift", "pad": 2, "padding": "zeros"},
                                {"op": "crop", "size": [ch, cw]},
                                {"op": "overlay", "alpha": 0.6, "alpha_max": 0.9, "per_frame": True}],
         (ch, cw), False),
    ]


# (label, B, S*C, H, W, C, dtypes, every pipeline or only shift+overlay)
SHAPES = [
    ("dmc", 1024, 9, 84, 84, 3, ("uint8", "float32"), True),
    ("atari", 1000, 4, 84, 84, 1, ("uint8", "float32"), True),
    ("rad", 256, 9, 100, 100, 3, ("uint8", "float32"), True),
    ("odd", 33, 6, 61, 47, 3, ("uint8", "float32"), True),
    # The real shared-memory edge, kCudaSharedBytes = 48128 bytes of dynamic
    # shared memory. In place a plane is staged alone: uint8 188x256 and
    # float32 94x128 are exactly 48128 bytes, one row more is computed from a
    # copy. Then the kernel's layout (kernels/augment_cuda_kernel.cuh
    # shared_layout; shift+overlay, 16 bytes per trace): in place uint8 160x256
    # takes the plane and the traces, exactly 48128 bytes, 161x256 the plane
    # alone; out of place 256x128 the traces, the plane and two output tiles.
    ("edge-inplace u8 188x256", 16, 2, 188, 256, 1, ("uint8",), True),
    ("edge-inplace+1 u8 189x256", 16, 2, 189, 256, 1, ("uint8",), False),
    ("edge-inplace f32 94x128", 16, 2, 94, 128, 1, ("float32",), True),
    ("edge-inplace+1 f32 95x128", 16, 2, 95, 128, 1, ("float32",), False),
    ("edge-plane+traces u8 160x256", 16, 2, 160, 256, 1, ("uint8",), False),
    ("edge-plane+traces+1 u8 161x256", 16, 2, 161, 256, 1, ("uint8",), False),
    ("two-tiles u8 256x128", 16, 2, 256, 128, 1, ("uint8",), False),
    # Planes whose starts take every 16-byte phase (the vector edges).
    ("width83", 64, 9, 83, 83, 3, ("uint8", "float32"), False),
    ("width85", 64, 9, 85, 85, 3, ("uint8", "float32"), False),
    ("width88", 64, 9, 84, 88, 3, ("uint8",), False),
    ("big", 8, 3, 256, 256, 3, ("uint8", "float32"), False),
]


@pytest.mark.parametrize("label,b,sc,h,w,c,dtypes,full", SHAPES, ids=[s[0] for s in SHAPES])
def test_every_pipeline_matches_the_cpu(label, b, sc, h, w, c, dtypes, full):
    gen = torch.Generator().manual_seed(0)
    failures = []
    for dt in dtypes:
        base = rnd_u8(gen, b, sc, h, w)
        obs = base.float() + torch.rand(base.shape, generator=gen) * 0.999 if dt == "float32" else base
        chosen = pipelines(h, w) if full else pipelines(h, w)[8:9]
        for pname, pipe, ov_hw, keeps in chosen:
            pool = None if ov_hw is None else rnd_u8(gen, 97, c, *ov_hw)
            tag = f"{label} {dt} {pname}"
            run_case(failures, f"{tag} out",
                     lambda x, p, pipe=pipe: O.augment(x, p, ops=pipe, seed=SEED, step=STEP), obs, pool)
            if keeps:
                run_case(failures, f"{tag} inplace",
                         lambda x, p, pipe=pipe: O.augment(x, p, ops=pipe, seed=SEED, step=STEP, inplace=True),
                         obs, pool)
            if dt == "uint8":
                run_case(failures, f"{tag} ->f32",
                         lambda x, p, pipe=pipe: O.augment(x, p, ops=pipe, seed=SEED, step=STEP,
                                                           out_dtype=torch.float32, scale=1 / 255, bias=-0.5),
                         obs, pool)
        if full:  # the single-op functions, with a non-zero op_index
            pool = rnd_u8(gen, 97, c, h, w)
            run_case(failures, f"{label} {dt} ops.shift",
                     lambda x, p: O.shift(x, seed=SEED, step=STEP, pad=4, op_index=3), obs, None)
            run_case(failures, f"{label} {dt} ops.crop",
                     lambda x, p: O.crop(x, seed=SEED, step=STEP, size=(h - 8, w - 8), op_index=2), obs, None)
            run_case(failures, f"{label} {dt} ops.overlay",
                     lambda x, p: O.overlay(x, p, seed=SEED, step=STEP, alpha=0.2, alpha_max=0.7, op_index=1),
                     obs, pool)
            run_case(failures, f"{label} {dt} ops.overlay_",
                     lambda x, p: O.overlay(x, p, seed=SEED, step=STEP, per_frame=True, inplace=True), obs, pool)
    assert not failures, "\n".join(failures)


def test_non_contiguous_input():
    gen = torch.Generator().manual_seed(1)
    big = rnd_u8(gen, 256, 9, 92, 92)
    pool = rnd_u8(gen, 64, 3, 84, 84)
    failures = []
    run_case(failures, "noncontig slice out",
             lambda x, p: O.augment(x[:, :, 4:88, 4:88], p, ops=SO, seed=SEED, step=STEP), big, pool)

    def inplace_slice(x, p):
        O.augment(x[:, :, 4:88, 4:88], p, ops=SO, seed=SEED, step=STEP, inplace=True)
        return x

    run_case(failures, "noncontig slice inplace (whole buffer)", inplace_slice, big, pool)
    cl = rnd_u8(gen, 128, 9, 84, 84)
    run_case(failures, "channels_last out",
             lambda x, p: O.augment(x.contiguous(memory_format=torch.channels_last), p, ops=SO, seed=SEED,
                                    step=STEP), cl, pool)
    assert not failures, "\n".join(failures)


@pytest.fixture(scope="module")
def batch():
    gen = torch.Generator().manual_seed(2)
    x = rnd_u8(gen, 512, 9, 84, 84)
    pool = rnd_u8(gen, 64, 3, 84, 84)
    return x, pool, x.cuda(), pool.cuda()


def test_determinism_and_fused_equals_sequential(batch):
    x_cpu, pool_cpu, x, p = batch
    a = O.augment(x, p, ops=SO, seed=7, step=1)
    b = O.augment(x, p, ops=SO, seed=7, step=1)
    c = O.augment(x, p, ops=SO, seed=7, step=2)
    assert torch.equal(a, b) and not torch.equal(a, c)
    seq = O.overlay(O.shift(x, seed=9, step=3, pad=4, op_index=0), p, seed=9, step=3, alpha=0.5, op_index=1)
    assert difference("cuda fused == sequential", seq.cpu(), O.augment(x, p, ops=SO, seed=9, step=3)) is None


def test_side_stream(batch):
    x_cpu, pool_cpu, x, p = batch
    want = O.augment(x_cpu, pool_cpu, ops=SO, seed=11, step=5)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        xs = x.clone()
        out = O.augment(xs, p, ops=SO, seed=11, step=5)
        O.augment(xs, p, ops=SO, seed=11, step=5, inplace=True)
    s.synchronize()
    assert difference("side stream out", want, out) is None
    assert difference("side stream inplace", want, xs) is None


def test_cuda_graph_capture_and_replay(batch):
    x_cpu, pool_cpu, x, p = batch
    static = x.clone()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            O.augment(static, p, ops=SO, seed=13, step=21, inplace=True)
            O.augment(static, p, ops=SO, seed=13, step=22)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        O.augment(static, p, ops=SO, seed=13, step=21, inplace=True)
        gout = O.augment(static, p, ops=SO, seed=13, step=22)
    fresh = rnd_u8(torch.Generator().manual_seed(3), 512, 9, 84, 84)
    static.copy_(fresh.cuda())
    g.replay()
    torch.cuda.synchronize()
    first = O.augment(fresh, pool_cpu, ops=SO, seed=13, step=21)
    assert difference("graph replay inplace", first, static) is None
    assert difference("graph replay out", O.augment(first, pool_cpu, ops=SO, seed=13, step=22), gout) is None


def test_torch_compile_fullgraph(batch):
    x_cpu, pool_cpu, x, p = batch
    f = torch.compile(lambda t, q: O.augment(t, q, ops=SO, seed=3, step=4), fullgraph=True)
    assert difference("torch.compile fullgraph", O.augment(x, p, ops=SO, seed=3, step=4).cpu(), f(x, p)) is None


# ------------------------------------------------ the second family (section 3a)
# Equal values in float too (section 3a's float math is part of the contract):
# no tolerance for these cases.

def second_family_pipelines(h, w, c):
    """(label, ops, overlay frame size or None, keeps the size) for h x w frames of C channels."""
    ch, cw = max(1, h - 16), max(1, w - 12)
    square = h == w
    pipes = [
        ("flip-h", [{"op": "flip", "p": 0.5}], None, True),
        ("flip-v", [{"op": "flip", "p": 0.7, "axis": "vertical"}], None, True),
        ("translate", [{"op": "translate", "size": [h + 24, w + 13]}], None, False),
        ("cutout", [{"op": "cutout", "p": 0.8}], None, True),
        ("cutout-color", [{"op": "cutout", "min": 3, "max": 60, "fill": "color"}], None, True),
        ("shift+flip+cutout+overlay", [{"op": "shift", "pad": 4}, {"op": "flip", "p": 0.5},
                                       {"op": "cutout", "min": 5, "max": 20, "fill": "color"},
                                       {"op": "overlay", "alpha": 0.5}], (h, w), True),
        ("crop+translate", [{"op": "crop", "size": [ch, cw]}, {"op": "translate", "size": [h, w]}],
         None, True),
    ]
    if square:
        pipes += [
            ("rotate", [{"op": "rotate", "p": 0.75}], None, True),
            ("rotate+shift+overlay", [{"op": "rotate", "p": 0.5}, {"op": "shift", "pad": 4},
                                      {"op": "overlay", "alpha": 0.3, "alpha_max": 0.8}], (h, w), True),
        ]
    if c == 3:
        pipes += [
            ("grayscale", [{"op": "grayscale", "p": 0.6}], None, True),
            ("jitter", [{"op": "color_jitter"}], None, True),
            ("jitter-nocontrast", [{"op": "color_jitter", "contrast": 0, "brightness": 1.5, "p": 0.8}],
             None, True),
            ("jitter-strong", [{"op": "color_jitter", "brightness": 3, "contrast": 5, "saturation": 9,
                                "hue": 0.5}], None, True),
            ("conv", [{"op": "random_conv"}], None, True),
            ("conv-xavier-zeros-none", [{"op": "random_conv", "init": "xavier", "padding": "zeros",
                                         "activation": "none"}], None, True),
            ("shift+conv+overlay", [{"op": "shift", "pad": 4}, {"op": "random_conv"},
                                    {"op": "overlay", "alpha": 0.5}], (h, w), True),
            ("crop+jitter+flip+gray", [{"op": "crop", "size": [ch, cw]}, {"op": "color_jitter", "p": 0.9},
                                       {"op": "flip", "p": 0.5}, {"op": "grayscale", "p": 0.3}],
             None, False),
            ("overlay+conv+jitter+translate", [{"op": "overlay", "alpha": 0.4}, {"op": "random_conv",
                                                                                  "padding": "zeros"},
                                               {"op": "color_jitter"}, {"op": "translate",
                                                                        "size": [h + 8, w + 8]}],
             (h, w), False),
        ]
    return pipes


# (label, B, S*C, H, W, C, dtypes)
SECOND_SHAPES = [
    ("dmc", 256, 9, 84, 84, 3, ("uint8", "float32")),
    ("atari", 256, 4, 84, 84, 1, ("uint8", "float32")),
    ("rad", 64, 9, 100, 100, 3, ("uint8", "float32")),
    ("odd", 33, 6, 61, 47, 3, ("uint8", "float32")),
    ("tiny", 17, 3, 1, 1, 3, ("uint8", "float32")),
    ("big", 4, 3, 256, 256, 3, ("uint8", "float32")),
]


@pytest.mark.parametrize("label,b,sc,h,w,c,dtypes", SECOND_SHAPES, ids=[s[0] for s in SECOND_SHAPES])
def test_second_family_matches_the_cpu(label, b, sc, h, w, c, dtypes):
    gen = torch.Generator().manual_seed(5)
    failures = []
    for dt in dtypes:
        base = rnd_u8(gen, b, sc, h, w)
        obs = base.float() + torch.rand(base.shape, generator=gen) * 0.999 if dt == "float32" else base
        for pname, pipe, ov_hw, keeps in second_family_pipelines(h, w, c):
            pool = None if ov_hw is None else rnd_u8(gen, 97, c, *ov_hw)
            tag = f"{label} {dt} {pname}"
            run_case(failures, f"{tag} out",
                     lambda x, p, pipe=pipe: O.augment(x, p, ops=pipe, seed=SEED, step=STEP), obs, pool, 0.0)
            if keeps:
                run_case(failures, f"{tag} inplace",
                         lambda x, p, pipe=pipe: O.augment(x, p, ops=pipe, seed=SEED, step=STEP, inplace=True),
                         obs, pool, 0.0)
            if dt == "uint8":
                run_case(failures, f"{tag} ->f32",
                         lambda x, p, pipe=pipe: O.augment(x, p, ops=pipe, seed=SEED, step=STEP,
                                                           out_dtype=torch.float32, scale=1 / 255, bias=-0.5),
                         obs, pool, 0.0)
        singles = [("flip", dict(p=0.5, axis="vertical")), ("translate", dict(size=(h + 5, w + 3))),
                   ("cutout", dict(min=2, max=9, fill="color", p=0.5))]
        if h == w:
            singles.append(("rotate", dict(p=0.5)))
        if c == 3:
            singles += [("grayscale", dict(p=0.5)), ("color_jitter", dict(hue=0.2, p=0.9)),
                        ("random_conv", dict(init="xavier"))]
        for name, kw in singles:  # the single-op functions, with a non-zero op_index
            run_case(failures, f"{label} {dt} ops.{name}",
                     lambda x, p, name=name, kw=kw: getattr(O, name)(x, seed=SEED, step=STEP, op_index=3, **kw),
                     obs, None, 0.0)
    assert not failures, "\n".join(failures)


def test_second_family_gather_matches_the_cpu():
    gen = torch.Generator().manual_seed(6)
    storage = rnd_u8(gen, 300, 3, 84, 84)
    index = torch.randint(0, 300, (256, 3), generator=gen)
    pool = rnd_u8(gen, 64, 3, 84, 84)
    pipe = [{"op": "shift", "pad": 4}, {"op": "random_conv"}, {"op": "color_jitter"},
            {"op": "rotate", "p": 0.5}, {"op": "overlay", "alpha": 0.5}]
    failures = []
    for dt in ("uint8", "float32"):
        s = storage if dt == "uint8" else storage.float() + 0.25
        want = O.gather_augment(s, index, pool, ops=pipe, seed=SEED, step=STEP)
        got = O.gather_augment(s.cuda(), index.cuda(), pool.cuda(), ops=pipe, seed=SEED, step=STEP)
        failure = difference(f"gather {dt}", want, got, 0.0)
        if failure:
            failures.append(failure)
    assert not failures, "\n".join(failures)
