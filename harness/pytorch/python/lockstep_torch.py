"""Puts a PyTorch program's collectives under lockstep, with no change to the program.

lockstep's launcher starts each rank of a `kind = "program"` scenario with LOCKSTEP_C10D=1 and
this folder on PYTHONPATH; sitecustomize.py then calls install() before the program's first line:

- registers the c10d backend "lockstep" (torch.distributed.Backend.register_backend), built from
  harness/pytorch/c10d_backend.cpp against the torch this interpreter imports;
- makes init_process_group("gloo") (or no backend) select it; LOCKSTEP_C10D_WRAP names the
  backend that is replaced ("gloo" by default, "none" to replace nothing and let the program
  ask for backend="lockstep" itself);
- numbers the program's steps: step n is the n-th forward pass of DistributedDataParallel (in a
  program without DDP: the number of optimizer steps taken), and every collective after it
  carries that step (with the program's file:line) in lockstep's trace, board and diagnoses;
- at exit, meets the other ranks in one verified barrier (a rank that ran fewer collectives is
  named), checks that a DDP module's parameters are the same on every rank (DDP's own
  contract), and writes the rank's status for the launcher, with its throughput (steps_per_s);
  an uncaught exception is reported instead.
"""
import atexit
import os
import sys
import time
import traceback

_failure = [""]


def install():
    import torch.distributed as dist
    import _lockstep_c10d as ext

    try:
        dist.Backend.register_backend("lockstep", ext.create, devices=["cpu"])
    except TypeError:  # torch 1.13: no devices argument
        dist.Backend.register_backend("lockstep", ext.create)

    wrapped = os.environ.get("LOCKSTEP_C10D_WRAP", "gloo").lower()
    init = dist.init_process_group

    def init_process_group(backend=None, *args, **kwargs):
        name = None if backend is None else str(backend).lower()
        if wrapped != "none" and (name is None or name == wrapped or name == "cpu:" + wrapped):
            backend = "lockstep"
        return init(backend, *args, **kwargs)

    init_process_group.__doc__ = init.__doc__
    dist.init_process_group = init_process_group
    dist.distributed_c10d.init_process_group = init_process_group

    import torch
    from torch.nn.parallel import DistributedDataParallel

    steps = _Steps(ext)
    forward = DistributedDataParallel.forward

    def counted_forward(self, *args, **kwargs):
        steps.ddp_forward(self)
        return forward(self, *args, **kwargs)

    DistributedDataParallel.forward = counted_forward

    optimizer_init = torch.optim.Optimizer.__init__

    def counted_init(self, *args, **kwargs):
        optimizer_init(self, *args, **kwargs)
        steps.optimizer_created()
        step = self.step

        def counted_step(*a, **k):
            out = step(*a, **k)
            steps.optimizer_step()
            return out

        self.step = counted_step

    torch.optim.Optimizer.__init__ = counted_init

    hook = sys.excepthook

    def excepthook(kind, value, tb):
        _failure[0] = "".join(traceback.format_exception_only(kind, value)).strip().splitlines()[-1]
        hook(kind, value, tb)

    sys.excepthook = excepthook
    atexit.register(lambda: steps.finish(_failure[0]))


class _Steps:
    """The program's step counter: step n is the n-th DDP forward pass (0-based); in a program
    without DDP, the number of optimizer.step() calls completed since the first optimizer was
    created (-1 before). Also the throughput (steps per second, step start to step start) and, for a DDP
    program, a digest of its module's parameters at exit, which must be the same on every rank."""

    def __init__(self, ext):
        self.ext, self.ddp, self.count, self.first, self.last = ext, None, 0, 0.0, 0.0
        self.optimizer_steps = 0

    def _begin(self, n):
        self.ext.set_step(n)
        self.last = time.perf_counter()
        if n == 0:
            self.first = self.last
        self.count = n + 1

    def ddp_forward(self, module):
        if self.ddp is None:
            self.ddp, self.count = module, 0
        self._begin(self.count)

    def optimizer_created(self):
        if self.ddp is None and self.count == 0:
            self._begin(0)

    def optimizer_step(self):
        self.optimizer_steps += 1
        if self.ddp is None:
            self._begin(self.count)

    def finish(self, failure):
        digest = -1
        if self.ddp is not None and not failure:
            digest = _parameter_digest(self.ddp.module)
        # Throughput: count step starts, the last count - 1 steps in last - first seconds.
        steps = self.count if self.ddp is not None else self.optimizer_steps
        rate = (self.count - 1) / (self.last - self.first) if self.count > 1 and self.last > self.first else 0.0
        self.ext.finish(failure, steps, rate, digest)


def _parameter_digest(module):
    """63 bits of a BLAKE2 hash of every parameter's exact value, in order (bf16 and f16 are
    widened to f32, which is exact)."""
    import hashlib

    import torch

    h = hashlib.blake2b(digest_size=8)
    for p in module.parameters():
        t = p.detach().cpu()
        if t.dtype in (torch.bfloat16, torch.float16):
            t = t.float()
        h.update(str(t.dtype).encode())
        h.update(t.contiguous().numpy().tobytes())
    return int.from_bytes(h.digest(), "little") >> 1
