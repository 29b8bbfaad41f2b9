"""Where a wrapped program's time goes: runs `python ddp_overhead_probe.py train.py ARGS` (as a
scenario's command, under `lockstep run`) and times, with perf_counter and no edit to
the lockstep_torch package, DDP's forward, backward(), and each part of a carried collective: describe,
program_site, ls_carry (lockstep's rank runtime) and inside it the program's own call's start and
wait callbacks. Writes $LOCKSTEP_PROBE_OUT/probe.<tag>.<rank>.txt (tag: $LOCKSTEP_PROBE_TAG) at exit,
before lockstep's own exit checks. Figures quoted in reports/evidence-ddp-overhead.md."""
import atexit, collections, gc, os, runpy, sys, threading, time
acc = collections.defaultdict(float); cnt = collections.Counter()
def timed(key, f):
    def w(*a, **k):
        t = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            acc[key] += time.perf_counter() - t; cnt[key] += 1
    return w
import torch
torch.Tensor.backward = timed("backward", torch.Tensor.backward)
from torch.nn.parallel import DistributedDataParallel as DDP
DDP.forward = timed("ddp_forward", DDP.forward)
rt = None
try:
    import lockstep_torch as lt
    for o in gc.get_objects():
        if isinstance(o, lt._Runtime):
            rt = o
except ImportError:
    pass
if rt is not None:
    rt.start_cb = lt._START(timed("cb_start (program's call started)", rt._start))
    rt.wait_cb = lt._WAIT(timed("cb_wait (program's call waited)", rt._wait))
    rt.lib.ls_carry = timed("ls_carry (all, incl. callbacks)", rt.lib.ls_carry)
    rt.carry = timed("runtime.carry (python side + ls_carry)", rt.carry)
    rt.describe = timed("runtime.describe", rt.describe)
    import lockstep_torch.runtime as ltr
    ltr.program_site = timed("program_site", ltr.program_site)
t0 = time.perf_counter()
def dump():
    total = time.perf_counter() - t0
    with open(os.path.join(os.environ.get("LOCKSTEP_PROBE_OUT", "."), "probe.%s.%s.txt" % (os.environ.get("LOCKSTEP_PROBE_TAG", "x"), os.environ.get("RANK", "0"))), "w") as f:
        f.write("total %.3f s\n" % total)
        for k in sorted(acc):
            f.write("%-45s n=%6d total=%8.3f s  mean=%8.1f us\n" % (k, cnt[k], acc[k], 1e6 * acc[k] / cnt[k]))
atexit.register(dump)
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
