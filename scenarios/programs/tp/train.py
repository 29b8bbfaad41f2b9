"""A 2-D parallel training program (no lockstep code in it), torch 2.x on the CPU with Gloo: a 2x2
device mesh, tensor parallelism over its "tp" dimension (an MLP whose first linear layer is split
by columns and second by rows: DTensor's ColwiseParallel and RowwiseParallel, which all-reduce the
block's output on the tp group), FSDP2 (`fully_shard`) over its "dp" dimension on top, AdamW with
StepLR, and a loss all-reduced over tp for logging. Both ranks of a tp pair draw the same batch
(they must); the dp pairs draw different ones. Deterministic: the same seed gives the same
parameters on every run. World size 4.

  --steps N          iterations (default 5)
  --digest-out PATH  rank 0 writes a 63-bit digest of every rank's final local shards there
  --bug batch        at step 2 rank 3 draws 6 rows where its tp pair (rank 2) draws 8: the tp
                     all-reduce of the block's output holds fewer elements on rank 3
  --bug loss-group   at step 2 rank 1 all-reduces its logged loss over dp instead of tp
"""
import argparse
import hashlib

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=5)
p.add_argument("--digest-out", default="")
p.add_argument("--bug", choices=["none", "batch", "loss-group"], default="none")
args = p.parse_args()

dist.init_process_group("gloo")
r, ws = dist.get_rank(), dist.get_world_size()
assert ws == 4, "train.py runs on 4 ranks"
mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16))
parallelize_module(model, mesh["tp"], {"0": ColwiseParallel(), "2": RowwiseParallel()})
fully_shard(model, mesh=mesh["dp"])
opt = torch.optim.AdamW(model.parameters(), lr=0.01)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
gen = torch.Generator().manual_seed(1 + mesh["dp"].get_local_rank())  # the same within a tp pair
tp, dp = mesh.get_group("tp"), mesh.get_group("dp")
for step in range(args.steps):
    x = torch.randn(8, 16, generator=gen)
    y = torch.randn(8, 16, generator=gen)
    if args.bug == "batch" and r == 3 and step == 2:
        x, y = x[:6], y[:6]
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    sched.step()
    opt.zero_grad()
    report = loss.detach().clone()
    dist.all_reduce(report, group=dp if args.bug == "loss-group" and r == 1 and step == 2 else tp)
h = hashlib.blake2b(digest_size=8)
for q in model.parameters():
    h.update(q.to_local().detach().contiguous().numpy().tobytes())
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
