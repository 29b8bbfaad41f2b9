"""A plain torch.distributed program (no lockstep code in it) that issues every collective
lockstep verifies in programs, through the public API, on the default group and on a group of
its own (new_group, not verified): all_reduce (sum, max), broadcast, all_gather,
all_gather_into_tensor and reduce_scatter_tensor / reduce_scatter (torch 2.x: torch 1.13's Gloo has
neither), all_to_all_single with and without splits, barrier, all_reduce_coalesced and
all_gather_coalesced, send and recv, reduce, gather and scatter. Each result is checked against its closed form, so a wrapper that changed a result fails
the program.

  --bug recv-dtype   rank 1 receives rank 0's f32 message into an f16 buffer
  --bug a2a-splits   rank 1 expects one element too many from every rank in the all_to_all
  --bug rs-max       rank 1 reduce-scatters with MAX where the others SUM (round 1; torch 2.x)
  --bug reduce-root  rank 0 reduces to root 0 where the others name the last rank (round 1)
  --bug gather-count rank 1 gathers 3 elements where the others gather 2 (round 1)
  --bug coalesced-count  rank 1's second tensor of an all_reduce_coalesced holds 3 elements, the
                     others' 2 (round 1)
  --bug async-count  rank 1's 8th of 20 all_reduces in flight at once holds 3 elements, the others'
                     2 (round 1)
  --backend nccl     the same on CUDA tensors (one GPU per rank, cuda:LOCAL_RANK)
"""
import argparse
import os

import torch
import torch.distributed as dist

p = argparse.ArgumentParser()
p.add_argument("--bug", choices=["none", "recv-dtype", "a2a-splits", "rs-max", "reduce-root", "gather-count", "coalesced-count", "async-count"], default="none")
p.add_argument("--rounds", type=int, default=3)
p.add_argument("--backend", choices=["gloo", "nccl"], default="gloo")
args = p.parse_args()

if args.backend == "nccl":  # torch 2.x: every tensor below is made on this rank's GPU
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    torch.cuda.set_device(dev)
    torch.set_default_device(dev)
dist.init_process_group(args.backend)
r, ws = dist.get_rank(), dist.get_world_size()
torch2 = int(torch.__version__.split(".")[0]) >= 2
# Each round is one step of a tiny model, as a training loop's (a forward at its start, the
# optimizer's step at its end): lockstep numbers the round's calls by it (round i is step i).
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for i in range(args.rounds):
    loss = model(torch.ones(1, 4)).sum()
    t = torch.full((4,), float(r + i))
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((4,), float(sum(range(ws)) + ws * i))), t
    m = torch.tensor([r])
    dist.all_reduce(m, op=dist.ReduceOp.MAX)
    assert m.item() == ws - 1
    b = torch.full((3,), float(r))
    dist.broadcast(b, ws - 1)
    assert torch.equal(b, torch.full((3,), float(ws - 1)))
    outs = [torch.empty(2) for _ in range(ws)]
    dist.all_gather(outs, torch.full((2,), float(r)))
    assert all(torch.equal(o, torch.full((2,), float(k))) for k, o in enumerate(outs))
    if torch2:
        flat = torch.empty(2 * ws)
        dist.all_gather_into_tensor(flat, torch.full((2,), float(r)))
        assert torch.equal(flat, torch.arange(ws).repeat_interleave(2).float())
        rs = torch.empty(2)
        dist.reduce_scatter(rs, [torch.full((2,), float(k)) for k in range(ws)])
        assert torch.equal(rs, torch.full((2,), float(r * ws)))
        # chunk k of rank j holds j + k: rank r gets sum_j (j + r), or max_j (j + r) with MAX
        rst = torch.empty(2)
        red_op = dist.ReduceOp.MAX if args.bug == "rs-max" and r == 1 and i == 1 else dist.ReduceOp.SUM
        dist.reduce_scatter_tensor(rst, torch.arange(ws).repeat_interleave(2).float() + r, op=red_op)
        if args.bug == "none":
            assert torch.equal(rst, torch.full((2,), float(sum(range(ws)) + ws * r))), rst
    root = ws - 1
    red = torch.full((3,), float(r + 1))
    dist.reduce(red, 0 if args.bug == "reduce-root" and r == 0 and i == 1 else root)
    if r == root and args.bug == "none":
        assert torch.equal(red, torch.full((3,), float(ws * (ws + 1) // 2))), red
    n = 3 if args.bug == "gather-count" and r == 1 and i == 1 else 2
    parts = [torch.empty(2) for _ in range(ws)] if r == root else None
    dist.gather(torch.full((n,), float(r)), parts, dst=root)
    if r == root and args.bug == "none":
        assert all(torch.equal(o, torch.full((2,), float(k))) for k, o in enumerate(parts))
    got_s = torch.empty(2)
    dist.scatter(got_s, [torch.full((2,), float(10 + k)) for k in range(ws)] if r == root else None, src=root)
    assert torch.equal(got_s, torch.full((2,), float(10 + r)))
    a = torch.arange(ws, dtype=torch.int64) + 10 * r
    got = torch.empty_like(a)
    dist.all_to_all_single(got, a)
    assert torch.equal(got, torch.arange(ws) * 10 + r), got
    # rank k sends k+1 elements to every rank
    send = torch.full(((r + 1) * ws,), r, dtype=torch.int64)
    bad = args.bug == "a2a-splits" and r == 1 and i == 1
    recv_splits = [k + 1 + (1 if bad else 0) for k in range(ws)]
    recv = torch.empty(sum(recv_splits), dtype=torch.int64)
    dist.all_to_all_single(recv, send, recv_splits, [r + 1] * ws)
    dist.barrier()
    # coalesced calls: one call, several tensors (each verified as a collective of its own)
    n_cb = 3 if args.bug == "coalesced-count" and r == 1 and i == 1 else 2
    ca, cb = torch.full((3,), float(r)), torch.ones(n_cb)
    dist.all_reduce_coalesced([ca, cb])
    if args.bug == "none":
        assert torch.equal(ca, torch.full((3,), float(sum(range(ws))))) and torch.equal(cb, torch.full((2,), float(ws))), (ca, cb)
    if args.backend == "gloo":  # NCCL has no allgather_coalesced
        parts = [[torch.empty(3), torch.empty(2)] for _ in range(ws)]
        dist.all_gather_coalesced(parts, [torch.full((3,), float(r)), torch.full((2,), float(-r))])
        assert all(torch.equal(p[0], torch.full((3,), float(k))) and torch.equal(p[1], torch.full((2,), float(-k)))
                   for k, p in enumerate(parts)), parts
    # async_op calls, as a program that overlaps its communication issues them: 20 in flight at once
    # (lockstep keeps at most 16 unchecked), the first read through its future, the second polled
    # until it has completed, the last never waited for (the calls after it order it)
    bufs = [torch.full((3 if args.bug == "async-count" and r == 1 and i == 1 and k == 7 else 2,), float(r + k)) for k in range(20)]
    works = [dist.all_reduce(v, async_op=True) for v in bufs]
    works[0].get_future().wait()
    while not works[1].is_completed():
        pass
    for w in works[2:19]:
        w.wait()
    if args.bug == "none":
        for k, v in enumerate(bufs[:19]):
            assert torch.equal(v, torch.full((2,), float(sum(range(ws)) + ws * k))), (k, v)
    if ws > 1 and r == 0:
        dist.send(torch.full((5,), 7.0), 1)
    elif ws > 1 and r == 1:
        x = torch.empty(5, dtype=torch.float16 if args.bug == "recv-dtype" and i == 1 else torch.float32)
        dist.recv(x, 0)
        assert torch.equal(x.float(), torch.full((5,), 7.0))
    sub = dist.new_group(list(range(ws)))
    s = torch.ones(1)
    dist.all_reduce(s, group=sub)
    assert s.item() == ws
    loss.backward()
    opt.step()
    opt.zero_grad()
if r == 0:
    print("ops.py: %d rounds on %d ranks, every result as expected (torch %s)" % (args.rounds, ws, torch.__version__))
dist.destroy_process_group()
