"""One rank of the ShardedReplayBuffer checks, launched through torchrun:
``sharded_worker.py MODE TRANSPORT [TIMEOUT]``, every buffer built with
``transport=TRANSPORT``. ``checks`` runs every check in turn and prints
``CHECK <name> OK`` after each one that passed (an assertion stops the rank
with a traceback); ``exits`` / ``stalls`` make rank 1 leave or stop calling and
print, on rank 0, how long sample() took to raise and what; ``hosts`` checks
the transport choice when the ranks report different hosts.

The shards' device comes from the environment: OBSAUG_SHARD_DEVICE=cpu (the
default: gloo, CPU shards; test_sharded_replay.py) or cuda (NCCL, rank r's
shard and engine on cuda:LOCAL_RANK; scripts/gpu_check.sh runs ``checks``
with one rank, as NCCL refuses two ranks on one GPU). With one rank, what
needs several ranks (a check, a part of one, the exits / stalls / hosts modes)
prints ``SKIP <what>: <reason>`` instead; the oracles stay on the CPU.

Shards: rank r's transitions are one episode of env r; frame t of rank r holds
t % 256, r and t // 256 in pixels [0, 0, 0..2] and noise elsewhere, so any
rank can rebuild every shard (the oracle: one unsharded ReplayBuffer holding
every shard's frames, env r's episode after env r-1's, frame t of rank r at
slot offset[r] + t).
"""
import datetime
import glob
import json
import math
import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist

import obsaug
import obsaug.distributed
from obsaug import ops
from obsaug.distributed import ShardedReplayBuffer

FRAME = (3, 8, 8)
CAPACITY = 256
PIPELINE = [{"op": "shift", "pad": 2}, {"op": "crop", "size": 6}]
TRANSPORT = "auto"  # main() sets it from the command line
DEVICE = "cpu"  # main() sets it from OBSAUG_SHARD_DEVICE: "cpu" or "cuda:LOCAL_RANK"


def engine_config():
    return {"device": DEVICE, "seed": 5, "frames": {"stack": 3, "channels": 3, "height": 8,
                                                   "width": 8},
            "pipeline": PIPELINE, "output": {"dtype": "uint8"}}


def frames_of(rank, n):
    g = torch.Generator().manual_seed(100 + rank)
    f = torch.randint(0, 256, (n, *FRAME), dtype=torch.uint8, generator=g)
    t = torch.arange(n)
    f[:, 0, 0, 0] = (t % 256).to(torch.uint8)
    f[:, 0, 0, 1] = rank
    f[:, 0, 0, 2] = (t // 256).to(torch.uint8)
    return f


def fill(buffer, rank, n):
    """n frames of one episode of env `rank` (n - 1 valid transitions), ending
    terminated, on the buffer's device."""
    if n == 0:
        return
    f = frames_of(rank, n).to(buffer.device)
    buffer.add_first(f[0], env=rank)
    for t in range(1, n):
        buffer.add(float(rank * 1000 + t), float(t) / 7 + rank, f[t], terminated=(t == n - 1),
                   env=rank)


def sharded(sizes, prioritized=False, **kw):
    rank = dist.get_rank()
    rb = ShardedReplayBuffer(CAPACITY, FRAME, 3, (), prioritized=prioritized, alpha=0.7,
                             beta=0.5, seed=3, transport=TRANSPORT, device=DEVICE, **kw)
    fill(rb, rank, sizes[rank])
    return rb


def oracle(sizes, prioritized=False):
    one = obsaug.ReplayBuffer(CAPACITY * len(sizes), FRAME, 3, (), prioritized=prioritized,
                              alpha=0.7, beta=0.5, seed=3)
    for r, n in enumerate(sizes):
        fill(one, r, n)
    offsets = [sum(sizes[:r]) for r in range(len(sizes))]
    return one, offsets


def gather_all(t):
    """Every rank's `t` (on the shards' device), concatenated, on the CPU."""
    t = t.to(DEVICE)
    out = [torch.empty_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(out, t)
    return torch.cat(out).cpu()


def wilson_hilferty(df, z=4.265):  # the chi-square quantile at p ~ 1e-5
    return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


def chi_square(counts, expected):
    return float(((counts - expected) ** 2 / expected).sum())


def expect_value_error(call, words, failure):
    """call() must raise ValueError with every one of words in its message;
    failure is the AssertionError's message when it returns instead."""
    try:
        call()
    except ValueError as e:
        assert all(w in str(e) for w in words), str(e)
    else:
        raise AssertionError(failure)


def ok(name):
    if dist.get_rank() == 0:
        print(f"CHECK {name} OK", flush=True)
    dist.barrier()


def skip(name, reason):
    if dist.get_rank() == 0:
        print(f"SKIP {name}: {reason}", flush=True)


# --- checks ----------------------------------------------------------------------

def check_uniform_union(world):
    sizes = [30 + 17 * r for r in range(world)]
    rb = sharded(sizes)
    valid = [n - 1 for n in sizes]
    B, calls = 64, 120
    got = torch.cat([rb.sample(B)["indices"] for _ in range(calls)])
    every = gather_all(got)
    owner, slot = every // CAPACITY, every % CAPACITY
    n_total = sum(valid)
    if world > 1:
        shard_counts = torch.bincount(owner, minlength=world).double()
        expected = torch.tensor(valid, dtype=torch.float64) / n_total * len(every)
        stat = chi_square(shard_counts, expected)
        assert stat < wilson_hilferty(world - 1), ("which shard", shard_counts, expected, stat)
    else:
        skip("uniform_union's chi-square over shards", "one rank holds the only shard")
        assert bool((owner == 0).all()), "an owner other than the only rank"
    offsets = [sum(valid[:r]) for r in range(world)]
    assert bool((slot < torch.tensor(valid)[owner]).all()), "a slot beyond its shard's valid ones"
    flat = torch.tensor(offsets)[owner] + slot
    per_transition = torch.bincount(flat, minlength=n_total).double()
    stat = chi_square(per_transition, torch.full((n_total,), len(every) / n_total))
    assert stat < wilson_hilferty(n_total - 1), ("which transition", stat)
    ok("uniform_union")


def set_priorities(rb, sizes, world):
    """Rank 0 gives every transition of every shard the priority 1 + (r * 37 + t) % 11
    (routed to the owners); the other ranks send nothing."""
    idx, pri = [], []
    if dist.get_rank() == 0:
        for r in range(world):
            for t in range(sizes[r] - 1):
                idx.append(r * CAPACITY + t)
                pri.append(1.0 + (r * 37 + t) % 11)
    rb.update_priorities(torch.tensor(idx, dtype=torch.int64),
                         torch.tensor(pri, dtype=torch.float64))


def check_update_priorities_routing(world):
    sizes = [20 + 9 * r for r in range(world)]
    rb = sharded(sizes, prioritized=True)
    set_priorities(rb, sizes, world)
    rank = dist.get_rank()
    slots = list(range(sizes[rank] - 1))
    q = rb.local._native.rows_at(slots)["weight"].cpu()
    want = torch.tensor([(1.0 + (rank * 37 + t) % 11) ** 0.7 for t in slots], dtype=torch.float64)
    assert torch.allclose(q, want, rtol=1e-12), (rank, q, want)
    # every rank updates one transition of its right neighbour: only that one changes
    target = (rank + 1) % world
    rb.update_priorities(torch.tensor([target * CAPACITY + 2]), torch.tensor([50.0 + rank]))
    q = rb.local._native.rows_at(slots)["weight"].cpu()
    want[2] = (50.0 + (rank - 1) % world) ** 0.7
    assert torch.allclose(q, want, rtol=1e-12), (rank, q, want)
    # a rejected call on one rank changes nothing anywhere and raises on every rank
    bad = torch.tensor([-1.0 if rank == world - 1 else 3.0])
    words = "finite and >= 0" if rank == world - 1 else f"rejected on rank {world - 1}"
    expect_value_error(lambda: rb.update_priorities(torch.tensor([0]), bad), [words],
                       "a negative priority was accepted")
    q2 = rb.local._native.rows_at(slots)["weight"].cpu()
    assert torch.equal(q2, q), "a rejected update changed priorities"
    ok("update_priorities_routing")


def check_prioritized_global(world):
    sizes = [12 + 5 * r for r in range(world)]
    rb = sharded(sizes, prioritized=True)
    set_priorities(rb, sizes, world)
    q = torch.tensor([(1.0 + (r * 37 + t) % 11) ** 0.7 for r in range(world)
                      for t in range(sizes[r] - 1)], dtype=torch.float64)
    offsets = [sum(n - 1 for n in sizes[:r]) for r in range(world)]
    B, calls = 48, 100
    batches = [rb.sample(B) for _ in range(calls)]
    every = gather_all(torch.cat([b["indices"] for b in batches]))
    flat = torch.tensor(offsets)[every // CAPACITY] + every % CAPACITY
    counts = torch.bincount(flat, minlength=len(q)).double()
    expected = q / q.sum() * len(every)
    stat = chi_square(counts, expected)
    assert stat < wilson_hilferty(len(q) - 1), ("proportional", stat)
    # importance weights: (q_i / q_min)^-beta with the global minimum
    mine = torch.cat([b["indices"] for b in batches]).cpu()
    mine_flat = torch.tensor(offsets)[mine // CAPACITY] + mine % CAPACITY
    want = (q[mine_flat] / q.min()).pow(-0.5).float()
    got = torch.cat([b["weights"] for b in batches]).cpu()
    assert torch.allclose(got, want, rtol=1e-6), "importance weights"
    ok("prioritized_global")


def oracle_rows(one, offsets, indices):
    """The oracle's rows for global indices: stacks, action, reward, discount."""
    slots = [offsets[int(i) // CAPACITY] + int(i) % CAPACITY for i in indices]
    return one._native.rows_at(slots)


def check_matches_oracle(world, prioritized):
    rank = dist.get_rank()
    sizes = [25 + 11 * r for r in range(world)]
    rb = sharded(sizes, prioritized=prioritized)
    one, offsets = oracle(sizes, prioritized)
    if prioritized:
        set_priorities(rb, sizes, world)
        for r in range(world):  # the same priorities in the oracle
            for t in range(sizes[r] - 1):
                one.update_priorities([offsets[r] + t], [1.0 + (r * 37 + t) % 11])
    engine = obsaug.Engine(engine_config(), rank=rank, world_size=world)
    B = 10
    kept = []  # (batch, its clone): later calls must not change a returned batch
    for share in (False, True):
        step = engine.step
        batch = rb.sample(B, augment=engine, share_augmentation=share)
        kept.append((batch, {key: t.clone() for key, t in batch.items()}))
        got = {key: t.cpu() for key, t in batch.items()}
        rows = oracle_rows(one, offsets, got["indices"])
        for key in ("action", "reward", "discount"):
            assert torch.equal(got[key], rows[key]), (key, got[key], rows[key])
        # the oracle's augmentation: this rank's rows of one batch of world * B rows,
        # row b_global = rank * B + b, with this rank's engine seed and step
        for key, index, s in (("obs", "obs_index", step),
                              ("next_obs", "next_index", step if share else step + 1)):
            stacks = one.storage[rows[index].reshape(-1)].reshape(B, 9, 8, 8)
            full = torch.zeros((world * B, 9, 8, 8), dtype=torch.uint8)
            full[rank * B:(rank + 1) * B] = stacks
            want = ops.augment(full, ops=PIPELINE, seed=5 + rank, step=s)[rank * B:(rank + 1) * B]
            assert torch.equal(got[key], want), (key, share)
        if prioritized:
            q = one._native.rows_at([offsets[int(i) // CAPACITY] + int(i) % CAPACITY
                                     for i in got["indices"]])["weight"]
            q_all = one._native.priority_summary()[1]
            assert torch.allclose(got["weights"], (q / q_all).pow(-0.5).float(), rtol=1e-6)
    for batch, clone in kept:
        for key in batch:
            assert torch.equal(batch[key], clone[key]), f"a later call changed {key}"
    # the owners and slots are the oracle's for the same draws: reproduce them here
    # from the Philox draws (docs/distributed.md) for the next call
    call = rb.local.sample_calls
    batch = rb.sample(B)
    valid = [n - 1 for n in sizes]
    if prioritized:
        per_shard = [sum((1.0 + (r * 37 + t) % 11) ** 0.7 for t in range(valid[r]))
                     for r in range(world)]
    else:
        per_shard = [float(v) for v in valid]
    owner, target = obsaug._C.shard_draws(3, call, rank * B, B, per_shard, prioritized)
    assert (batch["indices"] // CAPACITY).tolist() == owner, "owners"
    if prioritized:  # the first slot whose running sum exceeds the target, in its shard
        for b in range(B):
            r, t = owner[b], target[b]
            q_r = [(1.0 + (r * 37 + u) % 11) ** 0.7 for u in range(valid[r])]
            run, slot = 0.0, None
            for u, w in enumerate(q_r):
                run += w
                if run > t:
                    slot = u
                    break
            assert int(batch["indices"][b]) % CAPACITY == slot, (b, slot, batch["indices"][b])
    engine.close()
    ok("oracle_prioritized" if prioritized else "oracle_uniform")


def check_empty_shard_and_large_batch(world):
    rank = dist.get_rank()
    if world > 1:
        sizes = [0] + [6 + r for r in range(1, world)]  # rank 0 holds nothing
    else:
        skip("empty_shard_and_large_batch's empty shard among full ones",
             "one rank holds the only shard")
        sizes = [7]
    rb = sharded(sizes)
    n_total = sum(n - 1 for n in sizes if n)
    B = 20 * n_total + 1  # more draws than transitions: with replacement, all drawn
    engine = obsaug.Engine(engine_config(), rank=rank, world_size=world)
    batch = rb.sample(B, augment=engine)
    assert batch["obs"].shape == (B, 9, 6, 6) and batch["next_obs"].shape == (B, 9, 6, 6)
    owners = (batch["indices"] // CAPACITY).tolist()
    assert all(sizes[o] > 0 for o in owners), "an empty shard was drawn from"
    assert len(set(batch["indices"].tolist())) == n_total, "not every transition drawn"
    engine.close()
    # every shard empty: a ValueError on every rank
    empty = sharded([0] * world)
    expect_value_error(lambda: empty.sample(4), ["0 valid transitions in all"],
                       "sampling from empty shards did not raise")
    ok("empty_shard_and_large_batch")


def check_disagreeing_ranks_raise(world):
    if world == 1:
        skip("disagreeing_ranks_raise", "one rank cannot disagree with another")
        return
    rank = dist.get_rank()
    rb = sharded([8] * world)
    expect_value_error(lambda: rb.sample(4 + rank), ["batch_size must be equal on every rank"],
                       "different batch sizes were accepted")
    ok("disagreeing_ranks_raise")


def check_checkpoint(world):
    rank = dist.get_rank()
    sizes = [15 + 4 * r for r in range(world)]
    rb = sharded(sizes, prioritized=True)
    set_priorities(rb, sizes, world)
    rb.sample(5)
    root = os.path.join(os.environ["SHARDED_TMP"], "ckpt")
    rb.save(root)
    dist.barrier()
    want = [rb.sample(7) for _ in range(2)]
    back = ShardedReplayBuffer.load(root, transport=TRANSPORT, device=DEVICE)
    got = [back.sample(7) for _ in range(2)]
    for w, g in zip(want, got):
        for key in w:
            assert torch.equal(w[key], g[key]), key
    assert len(glob.glob(os.path.join(root, f"rank{rank}-of-{world}-*", "replay.obsaug"))) == 1
    assert os.path.isfile(os.path.join(root, "manifest.json"))
    # a checkpoint of another world size is refused with a message naming both
    other = os.path.join(os.environ["SHARDED_TMP"], f"other{rank}")
    os.makedirs(other, exist_ok=True)
    save_id, bigger = "0123456789abcdef", world + 2
    with open(os.path.join(other, "manifest.json"), "w") as f:
        json.dump({"format": obsaug.distributed._MANIFEST_FORMAT, "world_size": bigger,
                   "save_id": save_id,
                   "shards": [{"rank": r, "folder": f"rank{r}-of-{bigger}-{save_id}",
                               "bytes": 1} for r in range(bigger)]}, f)
    expect_value_error(lambda: ShardedReplayBuffer.load(other),
                       [f"world size {world + 2}", f"this group has {world}"],
                       "a checkpoint of another world size was loaded")
    ok("checkpoint")


def shm_files(rb):
    """This buffer's files in /dev/shm (named by the token every rank agreed on)."""
    return glob.glob(f"/dev/shm/obsaug-{rb._regions.token:016x}-*")


def check_transport_and_bytes(world):
    """The transport in use, bytes_sent on it, and no /dev/shm file left: the
    regions' files are unlinked once mapped, and close() drops the mappings.
    CUDA shards: "shared_memory" is refused and "auto" picks all_to_all."""
    rank = dist.get_rank()
    sizes = [40 + 7 * r for r in range(world)]
    on_cpu = torch.device(DEVICE).type == "cpu"
    if not on_cpu:
        expect_value_error(lambda: ShardedReplayBuffer(CAPACITY, FRAME, 3, (), seed=3,
                                                       transport="shared_memory",
                                                       device=DEVICE),
                           ["transport='shared_memory' needs", f"shards on {DEVICE}"],
                           "shared memory with CUDA shards was accepted")
        auto = ShardedReplayBuffer(CAPACITY, FRAME, 3, (), seed=3, transport="auto",
                                   device=DEVICE)
        assert auto.transport == "all_to_all", auto.transport
        auto.close()
    rb = sharded(sizes)
    want = "all_to_all" if TRANSPORT == "all_to_all" or not on_cpu else "shared_memory"
    assert rb.transport == want, (rb.transport, want)
    engine = obsaug.Engine(engine_config(), rank=rank, world_size=world)
    # the stats: an all_gather of int64s, or (shared memory) this rank's own header
    values = len(obsaug.distributed._STATS)
    control = 0 if want == "shared_memory" else values * (world - 1) * 8
    for B in (16, 64, 24):  # 64 grows the regions (a new generation of files)
        before = rb.bytes_sent
        batch = rb.sample(B, augment=engine)
        sent = rb.bytes_sent - before - control
        # rows this rank owned for the other ranks, and the bytes of one row
        every = gather_all(batch["indices"])
        requester = torch.arange(world).repeat_interleave(B)
        served = int(((every // CAPACITY == rank) & (requester != rank)).sum())
        row = (2 * batch["obs"][0].nbytes + batch["action"][0].nbytes + batch["reward"][0].nbytes
               + batch["discount"][0].nbytes + batch["indices"][0].nbytes + 8)  # + weight f64
        if want == "shared_memory":  # exactly the rows written into other ranks' regions
            assert sent == served * row, (B, sent, served, row)
        else:  # the all_to_all's segments: the rows plus padding to whole rows per segment
            pad = world * (math.lcm(batch["obs"][0].nbytes, 8) + 8)
            assert served * row <= sent < served * row + pad, (B, sent, served, row)
        assert shm_files(rb) == [], shm_files(rb)
    rb.close()
    expect_value_error(lambda: rb.sample(4), ["closed"], "a closed buffer sampled")
    assert shm_files(rb) == []
    engine.close()
    ok("transport_and_bytes")


def check_held_batches(world):
    """sample returns its batch without a copy (shared memory: views of a batch
    slot): a batch the caller holds, or any view of it, is never changed by
    later calls; a released slot is reused, so the regions stay bounded; with
    every slot held the batch comes back as a copy, still right."""
    rank = dist.get_rank()
    sizes = [30 + 5 * r for r in range(world)]
    rb = sharded(sizes)
    engine = obsaug.Engine(engine_config(), rank=rank, world_size=world)
    B = 12
    held = []  # (a batch or a view of one, its clone)
    for i in range(40):
        batch = rb.sample(B, augment=engine)
        if i % 5 == 0:  # up to 8 batches held: more than the slots, so copies too
            held.append((batch, {key: t.clone() for key, t in batch.items()}))
        elif i % 7 == 0:  # only a view of the obs held
            view = batch["obs"][3:7]
            held.append(({"obs": view}, {"obs": view.clone()}))
        del batch
        for kept, clone in held:
            for key in kept:
                assert torch.equal(kept[key], clone[key]), f"call {i} changed a held {key}"
    big = rb.sample(4 * B, augment=engine)  # larger slots: the regions grow (new files)
    for kept, clone in held:  # batches in the old regions stay valid
        for key in kept:
            assert torch.equal(kept[key], clone[key]), f"growing changed a held {key}"
    assert big["obs"].shape[0] == 4 * B
    del big
    held.clear()
    if rb.transport == "shared_memory":
        regions = rb._regions
        slots = [regions.own_slot(j).data_ptr() for j in range(regions.slots)]
        capacity, generation = regions.capacity, regions.generation
        used = set()
        batch = None
        for _ in range(50):  # the previous batch is held during each call, then dropped
            batch = rb.sample(B, augment=engine)
            used.add(batch["obs"].data_ptr())
        assert used <= set(slots[:2]), (used, slots)  # two slots take turns, no copy
        assert (regions.capacity, regions.generation) == (capacity, generation)
        kept = [batch] + [rb.sample(B, augment=engine) for _ in range(regions.slots - 2)]
        assert {b["obs"].data_ptr() for b in kept} == set(slots[:-1])
        copy = rb.sample(B, augment=engine)  # every slot held: a copy of the scratch slot
        assert copy["obs"].data_ptr() not in slots
        clone = {key: t.clone() for key, t in copy.items()}
        rb.sample(B, augment=engine)
        assert all(torch.equal(copy[key], clone[key]) for key in copy)
        del kept, batch
        assert rb.sample(B, augment=engine)["obs"].data_ptr() == slots[0]
    rb.close()
    engine.close()
    ok("held_batches")


def run_checks(world):
    check_uniform_union(world)
    check_update_priorities_routing(world)
    check_prioritized_global(world)
    check_matches_oracle(world, prioritized=False)
    check_matches_oracle(world, prioritized=True)
    check_empty_shard_and_large_batch(world)
    check_disagreeing_ranks_raise(world)
    check_checkpoint(world)
    check_transport_and_bytes(world)
    check_held_batches(world)


def run_fault(kind, timeout):
    rank = dist.get_rank()
    rb = sharded([10] * dist.get_world_size())
    rb.sample(4)  # one call together
    if rank == 1:
        if kind == "exits":
            os._exit(0)
        time.sleep(timeout * 2)  # stops calling, then leaves
        os._exit(0)
    start = time.monotonic()
    try:
        rb.sample(4)
    except Exception as e:  # torch.distributed's error for a lost peer or a timeout
        print(f"FAULT raised {type(e).__name__} (RuntimeError: "
              f"{isinstance(e, RuntimeError)}) after {time.monotonic() - start:.2f} s",
              flush=True)
        os._exit(0)
    print("FAULT no error", flush=True)
    os._exit(1)


def run_hosts():
    """Every rank reports its own host: "shared_memory" is refused, "auto" picks
    all_to_all, and sampling works."""
    rank, world = dist.get_rank(), dist.get_world_size()
    try:  # argument errors: raised before any collective
        ShardedReplayBuffer(CAPACITY, FRAME, 3, (), transport="nvlink")
    except ValueError as e:
        assert "one of auto, all_to_all, shared_memory, got 'nvlink'" in str(e), str(e)
    else:
        raise AssertionError("transport='nvlink' was accepted")
    try:
        ShardedReplayBuffer(CAPACITY, FRAME, 3, (), transport=1)
    except TypeError as e:
        assert "transport must be a str" in str(e), str(e)
    else:
        raise AssertionError("transport=1 was accepted")
    obsaug.distributed.host_identity = lambda: f"host-{rank}"
    expect_value_error(lambda: ShardedReplayBuffer(CAPACITY, FRAME, 3, (), seed=3,
                                                   transport="shared_memory", device=DEVICE),
                       ["transport='shared_memory' needs every rank on one host",
                        f"got {world} hosts"], "shared memory across hosts was accepted")
    rb = ShardedReplayBuffer(CAPACITY, FRAME, 3, (), seed=3, transport="auto", device=DEVICE)
    assert rb.transport == "all_to_all", rb.transport
    fill(rb, rank, 12)
    assert rb.sample(8)["obs"].shape == (8, 9, 8, 8)
    if rank == 0:
        print("HOSTS OK", flush=True)


def shard_device():
    """The shards' device from OBSAUG_SHARD_DEVICE ("cpu", the default, or "cuda":
    cuda:LOCAL_RANK); exits with a message, before any collective, when it
    cannot be used."""
    name = os.environ.get("OBSAUG_SHARD_DEVICE", "cpu")
    if name == "cpu":
        return "cpu"
    if name != "cuda":
        sys.exit(f"OBSAUG_SHARD_DEVICE must be cpu or cuda, got {name!r}")
    if not torch.cuda.is_available():
        sys.exit("OBSAUG_SHARD_DEVICE=cuda needs a CUDA GPU, but torch.cuda.is_available() "
                 "is False; unset it to run on the CPU with gloo")
    if not obsaug.built_with_cuda:
        sys.exit("OBSAUG_SHARD_DEVICE=cuda needs obsaug built with CUDA "
                 "(obsaug.built_with_cuda is False)")
    local_rank, count = int(os.environ.get("LOCAL_RANK", "0")), torch.cuda.device_count()
    if local_rank >= count:
        sys.exit(f"OBSAUG_SHARD_DEVICE=cuda: LOCAL_RANK {local_rank} has no GPU of its own "
                 f"({count} visible); NCCL needs one GPU per rank")
    return f"cuda:{local_rank}"


def main():
    global TRANSPORT, DEVICE
    mode, TRANSPORT = sys.argv[1], sys.argv[2]
    timeout = float(sys.argv[3]) if len(sys.argv) > 3 else 60.0
    DEVICE = shard_device()
    if DEVICE == "cpu":
        backend = "gloo"
    else:
        backend = "nccl"
        torch.cuda.set_device(DEVICE)
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout))
    if mode != "checks" and dist.get_world_size() == 1:
        skip(mode, "needs 2 ranks or more (one rank has no peer to lose or to differ from)")
    elif mode == "checks":
        with tempfile.TemporaryDirectory() as tmp:
            tmp_list = [tmp]
            dist.broadcast_object_list(tmp_list, src=0)  # one folder for every rank
            os.environ["SHARDED_TMP"] = tmp_list[0]
            run_checks(dist.get_world_size())
            dist.barrier()
    elif mode == "hosts":
        run_hosts()
    else:
        run_fault(mode, timeout)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
