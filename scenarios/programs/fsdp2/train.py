"""A sharded training program (no lockstep code in it), torch 2.x on the CPU with Gloo: FSDP2
(`fully_shard`) over a 2x2 device mesh's data-parallel dimension, each linear layer sharded over its
pair (FSDP2's all-gathers and reduce-scatters run on the mesh's group), a hand-written ZeRO-style
head whose gradient is reduce-scattered and whose weight is all-gathered over the whole world
(`reduce_scatter_tensor`, `all_gather_into_tensor`), a loss averaged over the mesh's tensor-parallel
dimension, LambdaLR, and object collectives (`all_gather_object`, `broadcast_object_list`) for
bookkeeping. Deterministic: the same seed gives the same parameters on every run. World size 4.

  --steps N          iterations (default 6)
  --digest-out PATH  rank 0 writes a 63-bit digest of every rank's final local shards there
  --bug rs-max       rank 2 reduce-scatters the head's gradient with MAX at step 3
  --bug obj-skip     rank 1 skips the step-2 broadcast_object_list (its own lr is already right)
"""
import argparse
import hashlib

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=6)
p.add_argument("--digest-out", default="")
p.add_argument("--bug", choices=["none", "rs-max", "obj-skip"], default="none")
args = p.parse_args()

dist.init_process_group("gloo")
r, ws = dist.get_rank(), dist.get_world_size()
assert ws == 4, "train.py runs on 4 ranks"
mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))
for layer in (model[0], model[2]):
    fully_shard(layer, mesh=mesh["dp"])
fully_shard(model, mesh=mesh["dp"])
# The head: a weight of 8 x 4 kept whole on every rank, its gradient reduce-scattered over the world
# (each rank updates its quarter) and the updated quarters all-gathered back (ZeRO stage 2 by hand).
head = torch.nn.Parameter(torch.randn(8, 4))
params = list(model.parameters())
opt = torch.optim.SGD(params, lr=0.05)
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (1 + s))
gen = torch.Generator().manual_seed(1 + mesh["dp"].get_local_rank())
tp = mesh.get_group("tp")
for step in range(args.steps):
    x = torch.randn(8, 16, generator=gen)
    y = torch.randn(8, 4, generator=gen)
    loss = torch.nn.functional.mse_loss(model(x) @ head, y)
    loss.backward()
    grad = head.grad.reshape(-1).contiguous()
    part = torch.empty(grad.numel() // ws)
    op = dist.ReduceOp.MAX if args.bug == "rs-max" and r == 2 and step == 3 else dist.ReduceOp.SUM
    dist.reduce_scatter_tensor(part, grad, op=op)
    with torch.no_grad():
        mine = head.detach().reshape(-1)[r * part.numel():(r + 1) * part.numel()] - 0.05 * part / ws
        whole = torch.empty(head.numel())
        dist.all_gather_into_tensor(whole, mine)
        head.copy_(whole.reshape(head.shape))
    head.grad = None
    opt.step()
    sched.step()
    opt.zero_grad()
    report = loss.detach().clone()
    dist.all_reduce(report, group=tp)
    seen = [None] * ws
    dist.all_gather_object(seen, [step, round(report.item(), 6)])
    assert [s[0] for s in seen] == [step] * ws, seen
    config = [{"lr": sched.get_last_lr()[0]}] if r == 0 else [None]
    if args.bug == "obj-skip" and r == 1 and step == 2:
        config = [{"lr": sched.get_last_lr()[0]}]
    else:
        dist.broadcast_object_list(config, src=0)
    assert abs(config[0]["lr"] - sched.get_last_lr()[0]) < 1e-12
h = hashlib.blake2b(digest_size=8)
for t in [q.to_local() if hasattr(q, "to_local") else q for q in params] + [head]:
    h.update(t.detach().contiguous().numpy().tobytes())
mine = torch.tensor([int.from_bytes(h.digest(), "little") >> 1], dtype=torch.int64)
every = [torch.zeros(1, dtype=torch.int64) for _ in range(ws)]
dist.all_gather(every, mine)
if r == 0:
    total = hashlib.blake2b(b"".join(int(e.item()).to_bytes(8, "little") for e in every), digest_size=8)
    digest = int.from_bytes(total.digest(), "little") >> 1
    if args.digest_out:
        with open(args.digest_out, "w") as f:
            f.write("%d\n" % digest)
    print("train.py: %d steps on %d ranks (torch %s), digest %x" % (args.steps, ws, torch.__version__, digest))
dist.destroy_process_group()
