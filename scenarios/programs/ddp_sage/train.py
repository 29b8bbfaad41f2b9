"""A plain PyTorch DDP training script, GraphSAGE-style, with no lockstep code in it.

It is what a user brings to lockstep: torchrun-style variables, init_process_group("gloo"),
DistributedDataParallel, a DataLoader whose collate builds each mini-batch (the seeds' features
and the mean of their sampled neighbours' features), and SGD. lockstep puts it under test by
running it unchanged (scenarios/README.md, "Programs").

--sync ddp (default) wraps the model in DistributedDataParallel; --sync manual is the
hand-written data-parallel loop instead: rank 0's parameters broadcast at the start, then one
all_reduce of the flattened gradient per step, divided by the world size.

The bugs are the program's own options, as a user would have them in their code:
  --bug cast-bf16          rank --bug-rank casts the model and its batch to bf16 at step
                           --bug-step, in the training loop (seed 001 of ../shared/CONTEXT.md)
  --bug cast-bf16-collate  every rank casts its batches to bf16 from --bug-step on, in collate
                           (the fix: the same place on every rank)
  --bug skip-step          rank --bug-rank skips step --bug-step
  --bug sleep              rank --bug-rank sleeps forever at step --bug-step
  --bug short-loader       rank --bug-rank's dataset has one step fewer (its DataLoader is shorter)
  --bug broadcast-root     every step starts with a broadcast of the step number from rank 0;
                           rank --bug-rank broadcasts from rank 1 instead at step --bug-step
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


def make_graph(nodes, degree, dim, classes, seed):
    g = torch.Generator().manual_seed(seed)
    feats = torch.randn(nodes, dim, generator=g)
    nbrs = torch.randint(0, nodes, (nodes, degree), generator=g)
    # Labels the model can learn: a linear function of a node's and its neighbours' features.
    w = torch.randn(dim, classes, generator=g)
    labels = ((feats + feats[nbrs].mean(1)) @ w).argmax(1)
    return feats, nbrs, labels


class Steps(Dataset):
    """Item i: (step i, this rank's seeds for step i), a disjoint share of a seeded shuffle."""

    def __init__(self, nodes, batch, steps, rank, world_size, seed):
        self.nodes, self.batch, self.steps = nodes, batch, steps
        self.rank, self.world_size, self.seed = rank, world_size, seed

    def __len__(self):
        return self.steps

    def __getitem__(self, step):
        g = torch.Generator().manual_seed(self.seed * 1000003 + step)
        order = torch.randperm(self.nodes, generator=g)[: self.batch * self.world_size]
        return step, order[self.rank :: self.world_size]


class Collate:
    def __init__(self, feats, nbrs, labels, fanout, seed, cast_from):
        self.feats, self.nbrs, self.labels = feats, nbrs, labels
        self.fanout, self.seed, self.cast_from = fanout, seed, cast_from

    def __call__(self, item):
        step, seeds = item
        g = torch.Generator().manual_seed(self.seed * 7919 + step)
        pick = torch.randint(0, self.nbrs.shape[1], (len(seeds), self.fanout), generator=g)
        sampled = self.nbrs[seeds].gather(1, pick)
        # Mean aggregation over the sampled neighbours, with index_add_.
        agg = torch.zeros(len(seeds), self.feats.shape[1])
        rows = torch.arange(len(seeds)).repeat_interleave(self.fanout)
        agg.index_add_(0, rows, self.feats[sampled.reshape(-1)])
        agg /= self.fanout
        x, neigh = self.feats[seeds], agg
        if self.cast_from is not None and step >= self.cast_from:
            x, neigh = x.to(torch.bfloat16), neigh.to(torch.bfloat16)
        return step, x, neigh, self.labels[seeds]


class Sage(nn.Module):
    def __init__(self, dim, hidden, classes):
        super().__init__()
        self.self_lin = nn.Linear(dim, hidden)
        self.neigh_lin = nn.Linear(dim, hidden, bias=False)
        self.out = nn.Linear(hidden, classes)

    def forward(self, x, neigh):
        return self.out(F.relu(self.self_lin(x) + self.neigh_lin(neigh)))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--nodes", type=int, default=4000)
    p.add_argument("--degree", type=int, default=12)
    p.add_argument("--fanout", type=int, default=5)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--classes", type=int, default=8)
    p.add_argument("--batch", type=int, default=64, help="seeds per rank per step")
    p.add_argument("--workers", type=int, default=0, help="DataLoader worker processes")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--sync", choices=["ddp", "manual"], default="ddp")
    p.add_argument("--bug", choices=["none", "cast-bf16", "cast-bf16-collate", "skip-step", "sleep", "short-loader",
                                       "broadcast-root", "loss-scale-torch2"], default="none")
    p.add_argument("--bug-rank", type=int, default=1)
    p.add_argument("--bug-step", type=int, default=27)
    p.add_argument("--log-every", type=int, default=0, help="rank 0 prints 'step N loss X' every N steps (0: never)")
    p.add_argument("--backend", choices=["gloo", "nccl"], default="gloo",
                   help="nccl: the model and each batch on cuda:LOCAL_RANK")
    args = p.parse_args()

    dev = torch.device("cpu")
    if args.backend == "nccl":
        dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(dev)
    dist.init_process_group(args.backend)
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)
    feats, nbrs, labels = make_graph(args.nodes, args.degree, args.dim, args.classes, args.seed)
    model = Sage(args.dim, args.hidden, args.classes).to(dev)
    if args.sync == "ddp":
        ddp = nn.parallel.DistributedDataParallel(model, device_ids=[dev] if dev.type == "cuda" else None)
    else:
        ddp = model
        for p_ in model.parameters():
            dist.broadcast(p_.data, 0)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    cast_from = args.bug_step if args.bug == "cast-bf16-collate" else None
    steps = args.steps - (1 if args.bug == "short-loader" and rank == args.bug_rank else 0)
    loader = DataLoader(Steps(args.nodes, args.batch, steps, rank, world_size, args.seed), batch_size=None,
                        collate_fn=Collate(feats, nbrs, labels, args.fanout, args.seed, cast_from),
                        num_workers=args.workers)
    bug_here = rank == args.bug_rank
    t0, loss = time.perf_counter(), None
    for step, x, neigh, y in loader:
        x, neigh, y = x.to(dev), neigh.to(dev), y.to(dev)
        if args.bug == "broadcast-root":
            marker = torch.tensor([step], device=dev)
            dist.broadcast(marker, 1 if bug_here and step == args.bug_step else 0)
        if bug_here and step == args.bug_step:
            if args.bug == "skip-step":
                continue
            if args.bug == "sleep":
                time.sleep(10**9)
            if args.bug == "cast-bf16":
                x, neigh = x.to(torch.bfloat16), neigh.to(torch.bfloat16)
        if x.dtype != next(model.parameters()).dtype:
            model.to(x.dtype)  # the graph and features went bf16: so does the model
        loss = F.cross_entropy(ddp(x, neigh).float(), y)
        if args.bug == "loss-scale-torch2" and step >= args.bug_step and int(torch.__version__.split(".")[0]) >= 2:
            loss = loss * 3.0  # a loss scale never undone, only under the newer torch (an upgrade's regression)
        opt.zero_grad()
        loss.backward()
        if args.sync == "manual":
            grads = [p_.grad for p_ in model.parameters()]
            flat = torch.cat([g.reshape(-1) for g in grads])
            dist.all_reduce(flat)
            flat /= world_size
            offset = 0
            for g in grads:
                g.copy_(flat[offset : offset + g.numel()].view_as(g))
                offset += g.numel()
        opt.step()
        if args.log_every and rank == 0 and step % args.log_every == 0:
            print(f"step {step} loss {loss.item():.9g}", flush=True)
    elapsed = time.perf_counter() - t0
    if rank == 0:
        print(f"train.py: {args.steps} steps in {elapsed:.2f} s ({args.steps / elapsed:.1f} steps/s), last loss {loss.item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
