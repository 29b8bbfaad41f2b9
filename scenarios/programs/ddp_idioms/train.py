"""A DDP training script with the idioms real scripts have, and no lockstep code in it.

An MLP classifier under DistributedDataParallel, trained with what a 2026 script carries: an LR
scheduler (--scheduler: StepLR, LambdaLR, OneCycleLR or ReduceLROnPlateau), autocast to bf16 on
the CPU (--amp; with torch's GradScaler where the torch has one for the CPU), gradient
accumulation over --accumulate micro-batches with DDP's no_sync() on all but the last, gradient
clipping, one or two optimizers (--optimizers 2: a second one for the head), the optimizers built
before or after init_process_group (--early), DDP's find_unused_parameters (--find-unused) and
static_graph (--static-graph), a torch.compile'd model (--compile, torch 2.x), and a logging
all-reduce of the loss after optimizer.step(). It runs under torch 1.13 (no GradScaler on the
CPU there, no torch.compile) and 2.x.

--digest-out FILE: rank 0 writes the replicas' parameter digest there at the end (the same 63
bits of BLAKE2 that lockstep reports), so a native run and a run under lockstep can be compared.

The bugs are the program's own options, as a user would have them in their code:
  --bug log-f64     rank --bug-rank logs its loss in f64 at iteration --bug-step (the all-reduce
                    after optimizer.step(): lockstep names that iteration)
  --bug lr-rank     rank --bug-rank's scheduler decays its LR ten times as fast: nothing fails,
                    the replicas drift apart (DDP's own contract is broken)
  --bug exit-early  rank --bug-rank raises ValueError at iteration --bug-step, before its forward
"""
import argparse
import contextlib
import hashlib
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset


class Batches(Dataset):
    """Item i: iteration i's micro-batches for this rank, drawn from a seed (the same on every run)."""

    def __init__(self, steps, accumulate, micro, dim, classes, rank, seed):
        self.steps, self.accumulate, self.micro = steps, accumulate, micro
        self.dim, self.classes, self.rank, self.seed = dim, classes, rank, seed

    def __len__(self):
        return self.steps

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(self.seed * 1000003 + i * 101 + self.rank)
        x = torch.randn(self.accumulate, self.micro, self.dim, generator=g)
        y = (x[..., : self.classes] * 2).argmax(-1)
        return x, y


def digest(module):
    h = hashlib.blake2b(digest_size=8)
    for p in module.parameters():
        t = p.detach().cpu()
        if t.dtype in (torch.bfloat16, torch.float16):
            t = t.float()
        h.update(str(t.dtype).encode())
        h.update(t.contiguous().numpy().tobytes())
    return int.from_bytes(h.digest(), "little") >> 1


class Net(nn.Module):
    """body -> head, plus an auxiliary head that only some iterations use (find_unused_parameters)."""

    def __init__(self, body, head, aux):
        super().__init__()
        self.body, self.head, self.aux = body, head, aux

    def forward(self, x, use_aux=False):
        h = self.body(x)
        out = self.head(h)
        return out + self.aux(h) if use_aux and self.aux is not None else out


def make_scheduler(kind, opt, steps, gamma):
    sched = torch.optim.lr_scheduler
    if kind == "steplr":
        return sched.StepLR(opt, step_size=2, gamma=gamma)
    if kind == "lambda":
        return sched.LambdaLR(opt, lambda i: gamma ** i)
    if kind == "onecycle":
        return sched.OneCycleLR(opt, max_lr=0.2, total_steps=steps)
    if kind == "plateau":
        return sched.ReduceLROnPlateau(opt, factor=gamma, patience=0)
    raise SystemExit("unknown --scheduler %s" % kind)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--accumulate", type=int, default=2)
    ap.add_argument("--scheduler", default="steplr", choices=["steplr", "lambda", "onecycle", "plateau"])
    ap.add_argument("--amp", action="store_true")
    ap.add_argument("--optimizers", type=int, default=1, choices=[1, 2])
    ap.add_argument("--early", action="store_true", help="build the model and optimizers before init_process_group")
    ap.add_argument("--find-unused", action="store_true", help="DDP(find_unused_parameters=True), with a branch unused on odd iterations")
    ap.add_argument("--static-graph", action="store_true", help="DDP(static_graph=True)")
    ap.add_argument("--compile", action="store_true", help="torch.compile the DDP model (torch >= 2.0)")
    ap.add_argument("--bug", default="", choices=["", "log-f64", "lr-rank", "exit-early"])
    ap.add_argument("--bug-rank", type=int, default=1)
    ap.add_argument("--bug-step", type=int, default=5)
    ap.add_argument("--digest-out", default="")
    args = ap.parse_args()

    torch.manual_seed(0)
    dim, classes = 32, 4
    body = nn.Sequential(nn.Linear(dim, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
    head = nn.Linear(64, classes)
    model = Net(body, head, nn.Linear(64, classes) if args.find_unused else None)

    def optimizers(params_of):
        if args.optimizers == 1:
            return [torch.optim.SGD(params_of(model), lr=0.1, momentum=0.9)]
        return [torch.optim.SGD(params_of(body), lr=0.1, momentum=0.9),
                torch.optim.Adam(list(params_of(head)) + (list(params_of(model.aux)) if model.aux is not None else []), lr=0.01)]

    opts = optimizers(lambda m: m.parameters()) if args.early else None
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    extra = {}
    if args.find_unused:
        extra["find_unused_parameters"] = True
    if args.static_graph:
        extra["static_graph"] = True
    ddp = DDP(model, **extra)
    forward = torch.compile(ddp) if args.compile else ddp
    if opts is None:
        opts = optimizers(lambda m: m.parameters())
    gamma = 0.5 if not (args.bug == "lr-rank" and rank == args.bug_rank) else 0.05
    scheds = [make_scheduler(args.scheduler, o, args.steps, gamma) for o in opts]
    scaler = None
    if args.amp and hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        try:
            scaler = torch.amp.GradScaler("cpu")
        except (TypeError, RuntimeError):
            scaler = None
    autocast = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if args.amp else contextlib.nullcontext

    data = Batches(args.steps, args.accumulate, 8, dim, classes, rank, seed=7)
    loader = DataLoader(data, batch_size=None, shuffle=False)
    for it, (x, y) in enumerate(loader):
        if args.bug == "exit-early" and rank == args.bug_rank and it == args.bug_step:
            raise ValueError("rank %d found a bad batch at iteration %d" % (rank, it))
        for o in opts:
            o.zero_grad(set_to_none=True)
        total = torch.zeros(())
        for m in range(args.accumulate):
            sync = m == args.accumulate - 1
            with (contextlib.nullcontext() if sync else ddp.no_sync()):
                with autocast():
                    use_aux = args.find_unused and it % 2 == 0
                    loss = F.cross_entropy(forward(x[m], use_aux) if use_aux else forward(x[m]), y[m]) / args.accumulate
                (scaler.scale(loss) if scaler else loss).backward()
            total += loss.detach().float()
        if scaler:
            for o in opts:
                scaler.unscale_(o)
        torch.nn.utils.clip_grad_norm_(ddp.parameters(), max_norm=1.0)
        for o in opts:
            if scaler:
                scaler.step(o)
            else:
                o.step()
        if scaler:
            scaler.update()
        logged = total.clone()
        if args.bug == "log-f64" and rank == args.bug_rank and it == args.bug_step:
            logged = logged.double()
        dist.all_reduce(logged)
        for s in scheds:
            s.step(logged.item()) if args.scheduler == "plateau" else s.step()
        if rank == 0 and it % 4 == 0:
            print("iteration %d loss %.4f lr %.4g" % (it, logged.item() / dist.get_world_size(), opts[0].param_groups[0]["lr"]), flush=True)

    if args.digest_out and rank == 0:
        with open(args.digest_out, "w") as f:
            f.write("%d\n" % digest(ddp.module))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
