"""Puts a PyTorch program's collectives under lockstep, with no change to the program, whatever
torch its interpreter imports (1.13 to 2.15): lockstep is never built against that torch.

lockstep's launcher starts each rank of a `kind = "program"` scenario (or `lockstep torchrun`) with
LOCKSTEP_C10D=1 and this folder on PYTHONPATH; sitecustomize.py then calls install() before the
program's first line:

- init_process_group(...) runs as the program asked (gloo, nccl, ...); then its default group is
  replaced by `LockstepGroup`, a torch.distributed.ProcessGroup subclass (c10d's PyProcessGroup
  trampoline: DDP's C++ reducer calls through it too) that hands every collective to lockstep's
  rank runtime, liblockstep_program.so (harness/pytorch/program.cpp, loaded with ctypes, no torch
  in it). The runtime records and verifies the call exactly as for lockstep's own ranks; the call
  runs on the program's real group and returns to the program at once, checked when it completes
  (ls_begin, ls_end), on one host and on several alike; lockstep's own calls are carried to their
  end through two callbacks (start, wait);
- numbers the program's steps: step n is the program's n-th iteration (from 0). An iteration ends
  with its optimizer steps, and the next begins at the first DataLoader batch or module forward after
  them (or when an optimizer that already stepped steps again), so a logging all-reduce after
  optimizer.step() is still the iteration's, and several optimizers or accumulation micro-steps
  make one iteration. A program that has shown neither a batch nor a forward (a loop of bare
  tensors) has nothing to mark where an iteration begins: there, a call after the optimizer's step
  is the next step (step n: n optimizer steps completed). A program without an optimizer counts the batches its DataLoaders yielded
  (step n: after the (n+1)-th batch). Steps are counted with torch's public optimizer step hooks
  (torch >= 2.0) or a counting wrapper on each optimizer class's step (1.13): an optimizer's step
  stays a bound method, as LR schedulers need. Every collective carries that step and the
  program's file:line into lockstep's trace, board and diagnoses;
- compares each DataLoader's length across the ranks when an epoch's iteration begins (iter()):
  unequal lengths are uneven_steps naming every rank's count, before any collective diverges;
- at destroy_process_group or exit, meets the other ranks in one verified barrier (a rank that ran
  fewer collectives is named), checks that a DDP module's parameters are the same on every rank
  (DDP's own contract), and writes the rank's status for the launcher with its throughput
  (steps_per_s) and the replicas' parameter digest; an uncaught exception is reported instead.

Every group the program makes after init_process_group (new_group and what calls it: new_subgroups,
a device mesh's dimensions) is wrapped the same way as its own chain (ls_open_group), verified through
a Gloo group of lockstep's own over its ranks. Several collectives may be in flight at once, on any
groups (DDP's buckets, FSDP2's prefetch), as natively. A coalesced call is verified member by member. Collectives lockstep does not verify (a
reduce op it does not know, lists of several tensors in a plain call) run unchanged on the program's group and are counted in the rank's
status (unverified_calls), which the result's notes name.
"""
import atexit
import ctypes
import os
import sys

from . import torch_private
from .binding import _START, _WAIT, _load_library  # noqa: F401: bench/ddp_overhead_probe.py reads them here
from .groups import _install_new_group, _make_group_class
from .runtime import _Runtime
from .sites import _describe_failure, _failure, _failure_step, program_site  # noqa: F401
from .steps import _install_steps, _Steps
from .torch_private import _forget_group, _keep_out_of_compile, _swap_default_group


def install() -> dict:
    import torch
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d
    from torch.nn.parallel import DistributedDataParallel

    wrap = os.environ.get("LOCKSTEP_C10D_WRAP", "gloo").lower() != "none"
    runtime = _Runtime() if wrap else None
    steps = runtime.steps if runtime else _Steps()
    state = {"runtime": runtime, "steps": steps}
    _install_steps(torch, DistributedDataParallel, steps, runtime)

    if wrap:
        group_class = _make_group_class(dist, runtime)
        _keep_out_of_compile(torch, group_class)
        init = dist.init_process_group

        def init_process_group(*args, **kwargs):
            out = init(*args, **kwargs)
            real = torch_private.default_group(c10d)
            runtime.open(real)
            # The program's own engine timeout (a timedelta, keyword or third positional): the
            # launcher's watchdog speaks before it runs out.
            timeout = kwargs.get("timeout", args[2] if len(args) > 2 else None)
            if hasattr(timeout, "total_seconds") and timeout.total_seconds() > 0:
                runtime.lib.ls_engine_timeout(timeout.total_seconds())
            wrapper = group_class(real)
            runtime.group = wrapper
            _swap_default_group(c10d, real, wrapper)
            return out

        init_process_group.__doc__ = init.__doc__
        dist.init_process_group = init_process_group
        c10d.init_process_group = init_process_group
        _install_new_group(c10d, dist, runtime, group_class)

        destroy = dist.destroy_process_group

        def destroy_process_group(group=None):
            # The end of the program's collectives: lockstep's final checks run while the group lives.
            wrapper = runtime.group
            if wrapper is None or not (group is None or group is wrapper):
                return destroy(group)
            if not runtime.finished:
                runtime.finish(_failure[0])
            out = destroy(group)
            # torch forgot the wrapper; the program's own group and lockstep's go now too, as the
            # program's group would without lockstep (not at interpreter exit, when peers are gone).
            _forget_group(c10d, runtime.real)
            runtime.group = runtime.real = runtime.control = None
            runtime.controls.clear()  # lockstep's groups go with the program's, while the peers live
            return out

        destroy_process_group.__doc__ = destroy.__doc__
        dist.destroy_process_group = destroy_process_group
        c10d.destroy_process_group = destroy_process_group

    hook = sys.excepthook

    def excepthook(kind, value, tb):
        _failure[0] = _describe_failure(kind, value, tb, steps)
        _failure_step[0] = steps.current()
        hook(kind, value, tb)

    sys.excepthook = excepthook

    def at_exit():
        if runtime is not None:
            runtime.finish(_failure[0])
            for control in runtime.controls.values():
                # A program that never destroyed its group: lockstep's groups are never destroyed
                # either (their destructor at interpreter exit, with peers gone, may abort).
                ctypes.pythonapi.Py_IncRef(ctypes.py_object(control))
        else:
            _report_only(steps, _failure[0])

    atexit.register(at_exit)
    return state


def _report_only(steps, failure):
    """A program on its own backend (wrap = "none"): lockstep only reports its steps."""
    path = os.environ.get("LOCKSTEP_PROGRAM_LIB", "")
    if not path or failure:
        return
    lib = _load_library()
    lib.ls_finish(b"", -1, steps.count(), steps.rate(), steps.median_duration(), -1, -1)
