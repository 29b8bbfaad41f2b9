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
  (ls_begin, ls_end), or, where the control group verifies, is carried to its end through two
  callbacks (start, wait);
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
a Gloo group of lockstep's own over its ranks. Collectives lockstep does not verify (coalesced calls,
a reduce op it does not know) run unchanged on the program's group and are counted in the rank's
status (unverified_calls), which the result's notes name.
"""
import array
import atexit
import ctypes
import os
import sys
import threading
import time
import traceback
import weakref

_failure = [""]          # the program's uncaught exception, as the diagnosis quotes it
_failure_step = [-1]     # the program's step when it was raised
_ABI_VERSION = b"6"      # the C interface this file speaks (program.h's ls_version)
_HERE = os.path.dirname(os.path.abspath(__file__))


class _Call(ctypes.Structure):
    _fields_ = [
        ("op", ctypes.c_int32), ("dtype", ctypes.c_int32), ("reduce", ctypes.c_int32),
        ("root", ctypes.c_int32), ("tag", ctypes.c_int32), ("device", ctypes.c_int32),
        ("inp", ctypes.c_void_p), ("in_count", ctypes.c_int64),
        ("out", ctypes.c_void_p), ("out_count", ctypes.c_int64),
        ("nsplits", ctypes.c_int64),
        ("send_counts", ctypes.POINTER(ctypes.c_int64)), ("recv_counts", ctypes.POINTER(ctypes.c_int64)),
    ]


_START = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int, ctypes.c_int64, ctypes.POINTER(_Call), ctypes.c_void_p, ctypes.c_int)
_WAIT = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int)


def _error_text(e):
    """The engine's error, for the C side: its text (or its type when it has none)."""
    return (str(e) or type(e).__name__).encode(errors="replace")


def _error_into(err, errlen, e):
    text = _error_text(e)[: errlen - 1] + b"\0"
    ctypes.memmove(err, text, len(text))


def _load_library():
    path = os.environ.get("LOCKSTEP_PROGRAM_LIB", "")
    lib = ctypes.CDLL(path)
    lib.ls_version.restype = ctypes.c_char_p
    lib.ls_version.argtypes = []
    version = lib.ls_version()
    if version != _ABI_VERSION:
        raise RuntimeError("lockstep: %s speaks C interface version %r, this lockstep_torch.py version %r: the "
                           "library and the Python side come from different builds" % (path, version, _ABI_VERSION))
    lib.ls_code.restype = ctypes.c_int
    lib.ls_code.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    lib.ls_open.restype = ctypes.c_int
    lib.ls_open.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, _START, _WAIT, ctypes.c_char_p, ctypes.c_int]
    lib.ls_board_verifies.restype = ctypes.c_int
    lib.ls_carry.restype = ctypes.c_int
    lib.ls_carry.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.POINTER(_Call), ctypes.c_char_p, ctypes.c_int64]
    lib.ls_p2p_begin.restype = ctypes.c_int64
    lib.ls_p2p_begin.argtypes = [ctypes.c_int, ctypes.POINTER(_Call), ctypes.c_char_p, ctypes.c_int64]
    lib.ls_p2p_end.restype = ctypes.c_int
    lib.ls_p2p_end.argtypes = [ctypes.c_int64, ctypes.c_char_p]
    lib.ls_open_group.restype = ctypes.c_int
    lib.ls_open_group.argtypes = [ctypes.POINTER(ctypes.c_int32), ctypes.c_int, ctypes.c_int]
    lib.ls_begin.restype = ctypes.c_int64
    lib.ls_begin.argtypes = [ctypes.POINTER(_Call), ctypes.c_char_p, ctypes.c_int64]
    lib.ls_end.restype = ctypes.c_int
    lib.ls_end.argtypes = [ctypes.c_int64, ctypes.c_char_p]
    lib.ls_check_same_count.restype = None
    lib.ls_check_same_count.argtypes = [ctypes.c_int64, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int64]
    lib.ls_unverified.restype = None
    lib.ls_unverified.argtypes = [ctypes.c_char_p, ctypes.c_int64]
    lib.ls_engine_timeout.restype = None
    lib.ls_engine_timeout.argtypes = [ctypes.c_double]
    lib.ls_finish.restype = ctypes.c_int
    lib.ls_finish.argtypes = [ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_double, ctypes.c_double, ctypes.c_int64,
                              ctypes.c_int64]
    return lib


def _codes(lib, kind, names):
    out = {}
    for n in names:
        v = lib.ls_code(kind.encode(), n.encode())
        if v < 0:
            raise RuntimeError("lockstep: liblockstep_program.so does not know %s %r" % (kind, n))
        out[n] = v
    return out


def _is_program_file(name):
    if not name or name.startswith("<"):
        return False
    for lib in ("/torch/", "/site-packages/", "/dist-packages/", "/lib/python3", "lockstep_torch.py"):
        if lib in name:
            return False
    return True


def _site_in(frame):
    while frame is not None:
        name = frame.f_code.co_filename
        if _is_program_file(name):
            return "%s:%d" % (os.path.basename(name), frame.f_lineno)
        frame = frame.f_back
    return ""


def program_site():
    """"train.py:57": the innermost frame of the program's own code on this thread; on a thread that
    runs no program code (DDP's autograd thread), the main thread's (where backward() was called)."""
    site = _site_in(sys._getframe(1))
    if site or threading.current_thread() is threading.main_thread():
        return site
    return _site_in(sys._current_frames().get(threading.main_thread().ident))


class _Steps:
    """The program's step (module docstring), its throughput (steps per second, one iteration's
    first optimizer step to the next's) and, for a DDP program, its module, whose parameter digest
    at exit is the rank's digest."""

    def __init__(self):
        self.iterations = 0      # iterations whose optimizer steps ran (the last may still be open)
        self.pending = False     # the last iteration's optimizer stepped; the next has not begun
        self.stepped = set()     # ids of the optimizers that stepped in the pending iteration
        self.depth = 0           # optimizer steps in progress (a wrapper's step runs its inner one's)
        self.marks = False       # the program has shown where its iterations begin (a batch, a forward)
        self.batches = 0
        self.has_optimizer = False
        self.optimizers = []     # weak references, in creation order
        self.ddp = None
        self.first = self.last = 0.0
        self.starts = 0
        self.durations = array.array("d")  # seconds from each step's start to the next's

    def current(self):
        if self.has_optimizer:
            if self.pending and not self.marks:
                self._begin_next()  # no batch or forward to mark a start: anything after the step is the next
            return self.iterations - 1 if self.pending else self.iterations
        return self.batches - 1 if self.batches else -1

    def _started(self):
        now = time.perf_counter()
        if self.starts == 0:
            self.first = now
        else:
            self.durations.append(now - self.last)
        self.last = now
        self.starts += 1

    def _begin_next(self):
        self.pending = False
        self.stepped = set()

    def optimizer_created(self, optimizer=None):
        if optimizer is not None:
            self.optimizers.append(weakref.ref(optimizer))
        if not self.has_optimizer:
            self.has_optimizer = True
            self._started()

    def optimizer_step_begins(self):
        self.depth += 1

    def optimizer_step_ends(self, optimizer):
        """One optimizer's step() returned; only the outermost of nested steps counts."""
        self.depth = max(0, self.depth - 1)
        if self.depth:
            return
        if self.pending and id(optimizer) in self.stepped:
            self._begin_next()  # the same optimizer again with no batch or forward between
        if not self.pending:
            self.pending = True
            self.iterations += 1
            self._started()
        self.stepped.add(id(optimizer))

    def forward(self, module):
        self.marks = True
        if self.pending:
            self._begin_next()
        if self.ddp is None and self.is_ddp(module):
            self.ddp = module

    is_ddp = staticmethod(lambda module: False)

    def batch(self):
        self.marks = True
        self.batches += 1
        if self.pending:
            self._begin_next()
        if not self.has_optimizer:
            self._started()

    def count(self):
        return self.iterations if self.has_optimizer else self.batches

    def optimized_parameters(self):
        """The parameters the program's optimizers hold, each once, in creation and group order."""
        seen, out = set(), []
        for ref in self.optimizers:
            opt = ref()
            for group in getattr(opt, "param_groups", []) if opt is not None else []:
                for p in group.get("params", []):
                    if id(p) not in seen:
                        seen.add(id(p))
                        out.append(p)
        return out

    def rate(self):
        return (self.starts - 1) / (self.last - self.first) if self.starts > 1 and self.last > self.first else 0.0

    def median_duration(self):
        """The median step's seconds (0 before two steps): unlike the mean rate, it does not move
        when another process takes the CPU for a few of the steps."""
        d = sorted(self.durations)
        if not d:
            return 0.0
        mid = len(d) // 2
        return d[mid] if len(d) % 2 else (d[mid - 1] + d[mid]) / 2


def _parameter_digest(parameters):
    """63 bits of a BLAKE2 hash of every parameter's exact value, in order (bf16 and f16 are widened
    to f32, which is exact). A DTensor is taken as this rank's local shard."""
    import hashlib

    import torch

    h = hashlib.blake2b(digest_size=8)
    for p in parameters:
        t = p.detach()
        if hasattr(t, "to_local"):
            t = t.to_local()
        t = t.cpu()
        if t.dtype in (torch.bfloat16, torch.float16):
            t = t.float()
        h.update(str(t.dtype).encode())
        h.update(t.contiguous().numpy().tobytes())
    return int.from_bytes(h.digest(), "little") >> 1


class _Failed:
    """A call the engine refused when it was started: fails when waited for."""

    def __init__(self, error):
        self.error = error

    def wait(self):
        raise self.error


class _Runtime:
    """The process's one connection to liblockstep_program.so."""

    def __init__(self):
        import torch

        self.torch = torch
        self.lib = _load_library()
        self.ops = _codes(self.lib, "op", ["all_reduce", "all_gather", "all_to_all", "broadcast", "barrier", "send", "recv",
                                           "reduce_scatter", "reduce", "gather", "scatter"])
        self.reduces = _codes(self.lib, "reduce", ["sum", "max", "min", "avg"])
        dtypes = _codes(self.lib, "dtype", ["f32", "f64", "f16", "bf16", "i8", "u8", "i32", "i64"])
        self.dtype_code = {
            torch.float32: dtypes["f32"], torch.float64: dtypes["f64"], torch.float16: dtypes["f16"],
            torch.bfloat16: dtypes["bf16"], torch.int8: dtypes["i8"], torch.uint8: dtypes["u8"],
            torch.bool: dtypes["u8"], torch.int32: dtypes["i32"], torch.int64: dtypes["i64"],
        }
        self.dtype_of_code = {dtypes["f32"]: torch.float32, dtypes["f64"]: torch.float64, dtypes["f16"]: torch.float16,
                              dtypes["bf16"]: torch.bfloat16, dtypes["i8"]: torch.int8, dtypes["u8"]: torch.uint8,
                              dtypes["i32"]: torch.int32, dtypes["i64"]: torch.int64}
        self.steps = _Steps()
        self.group = None       # the LockstepGroup, once init_process_group ran
        self.real = None        # the program's own default group
        self.control = None     # a Gloo group of lockstep's own (its calls, and verification across hosts)
        self.controls = {}      # group id -> lockstep's Gloo group over that group's ranks (0: self.control)
        self.groups_made = 0    # the program's new_group calls so far (every rank makes them in one order)
        self.pending = {}       # token -> the program's call, run by the start callback
        self.works = {}         # handle -> a started Work
        self.next_token = 1
        self.next_handle = 0
        self.started = None     # the Work of the program's call being carried
        self.unverified = {}
        self.finished = False
        self.start_cb = _START(self._start)
        self.wait_cb = _WAIT(self._wait)

    # The callbacks liblockstep_program.so runs the calls through (program.h).
    def _start(self, group, token, call, err, errlen):
        try:
            if token:
                work = self.started = self.pending.pop(token)()
            else:
                work = self._run_raw(call.contents, self.controls[group // 2])
            handle = self.next_handle
            self.next_handle += 1
            self.works[handle] = work
            return handle
        except BaseException as e:  # noqa: B036: an exception must never cross into C
            # An engine that refuses the call at once (torch 1.13's Gloo and bf16) fails at wait,
            # after the verifier compared the ranks' calls.
            handle = self.next_handle
            self.next_handle += 1
            self.works[handle] = _Failed(e)
            return handle

    def _wait(self, handle, err, errlen):
        try:
            work = self.works.pop(handle)
            if work is not None:
                work.wait()
            return 0
        except BaseException as e:  # noqa: B036
            _error_into(err, errlen, e)
            return 1

    def _host_tensor(self, ptr, count, dtype_code):
        torch = self.torch
        dtype = self.dtype_of_code[dtype_code]
        size = count * torch.empty((), dtype=dtype).element_size()
        if count == 0 or not ptr:
            return torch.empty(0, dtype=dtype)
        return torch.frombuffer((ctypes.c_char * size).from_address(ptr), dtype=dtype)

    def _run_raw(self, c, pg):
        """A call of lockstep's own (its barrier, its digest gather, the verifier's records), on host
        buffers: it runs on `pg`, lockstep's Gloo group over the call's group, whatever backend the
        program uses."""
        if c.op == self.ops["barrier"]:
            return pg.barrier()
        t_in = self._host_tensor(c.inp, c.in_count, c.dtype)
        if c.op == self.ops["all_gather"]:
            out = self._host_tensor(c.out, c.out_count, c.dtype)
            return pg.allgather([list(out.chunk(pg.size()))], [t_in])
        if c.op == self.ops["send"]:
            return pg.send([t_in], c.root, c.tag)
        if c.op == self.ops["recv"]:
            return pg.recv([t_in], c.root, c.tag)
        if c.op == self.ops["all_reduce"]:
            return pg.allreduce([t_in])
        raise RuntimeError("lockstep: no raw path for op %d" % c.op)

    def open(self, real):
        import torch._C._distributed_c10d as c10d_c
        import torch.distributed as dist

        self.c10d_c = c10d_c
        self.dist = dist
        self.real = real
        self.rank, self.size = real.rank(), real.size()
        store = dist.distributed_c10d._get_default_store()
        self.control = dist.ProcessGroupGloo(dist.PrefixStore("lockstep-control/", store), self.rank, self.size)
        self.controls[0] = self.control
        err = ctypes.create_string_buffer(1024)
        if self.lib.ls_open(self.rank, self.size, ("torch " + self.torch.__version__).encode(), self.start_cb, self.wait_cb, err, 1024) != 0:
            raise RuntimeError("lockstep: " + err.value.decode(errors="replace"))

    def describe(self, op, tensor=None, out=None, reduce=None, root=-1, tag=0, send=None, recv=None):
        c = _Call()
        c.op = self.ops[op]
        c.root, c.tag = root, tag
        c.reduce = self.reduces[reduce] if reduce else self.reduces["sum"]
        keep = []
        for t, name in ((tensor, "inp"), (out, "out")):
            if t is None:
                continue
            if not t.is_contiguous():
                t = t.contiguous()
                keep.append(t)
            code = self.dtype_code.get(t.dtype)
            if code is None:
                raise TypeError("lockstep: %s of dtype %s is not supported" % (op, t.dtype))
            c.dtype = code
            setattr(c, name, t.data_ptr())
            setattr(c, name.replace("inp", "in") + "_count", t.numel())
            if t.is_cuda:
                c.device = 1
        if tensor is None and out is not None:
            c.inp, c.in_count = None, 0
        if send is not None:
            n = len(send)
            s_arr, r_arr = (ctypes.c_int64 * n)(*send), (ctypes.c_int64 * n)(*recv)
            keep += [s_arr, r_arr]
            c.nsplits, c.send_counts, c.recv_counts = n, s_arr, r_arr
        return c, keep

    def carry(self, call, run, results=None, group=0):
        """Runs the program's call `run` (which starts it on the program's group and returns its
        Work) under lockstep. A collective is begun in lockstep's chain, started, and returned at
        once as a Work that completes when the call has completed and lockstep has checked it
        (_ended, on the engine's thread): the program goes on meanwhile, as on its own group (DDP's
        all-reduce of a bucket runs while its backward pass computes the next). Otherwise (a
        point-to-point call, `results` given; or ls_begin declines) lockstep carries the call to
        its end and returns a completed Work whose future holds `results` (Gloo's send and recv
        works cannot be waited twice) or the program's own Work, complete."""
        c, keep = call  # keep: what c points into, alive while lockstep reads it
        site, step = program_site().encode(), self.steps.current()
        if results is None and group == 0:
            begun = self.lib.ls_begin(ctypes.byref(c), site, step)
            if begun >= 0:
                return self._begun(begun, run)
            if self.finished:
                return run()
        token = self.next_token
        self.next_token += 1
        self.pending[token] = run
        carried = self.lib.ls_carry(group, token, ctypes.byref(c), site, step)
        if carried != 0:
            self.pending.pop(token, None)
            return run()
        work, self.started = self.started, None
        if work is None:  # carried means started and waited: never reached
            raise RuntimeError("lockstep: the program's call was carried but never started")
        return work if results is None else self.done(results)

    def p2p(self, group, call, run, checked_work):
        """A point-to-point call, non-blocking as the program's own: issued in lockstep's chain
        (ls_p2p_begin: its record travels to the peer, which compares it), started on the program's
        group, and returned at once as `checked_work(work, end)`, a Work whose wait() waits for the
        program's call and then has lockstep check it (ls_p2p_end ends the process on a
        diagnosis). Several may be in flight at once (isend/irecv pairs, batch_isend_irecv)."""
        c, keep = call
        begun = self.lib.ls_p2p_begin(group, ctypes.byref(c), program_site().encode(), self.steps.current())
        if begun < 0:
            return None
        try:
            work = run()
        except BaseException as e:  # noqa: B036: refused at once
            self.lib.ls_p2p_end(begun, _error_text(e))
            raise
        return checked_work(work, lambda failure: self.lib.ls_p2p_end(begun, failure), keep)

    def _begun(self, begun, run):
        """Starts the program's call begun in lockstep's chain; its Work, ended by _ended."""
        try:
            work = run()
        except BaseException as e:  # noqa: B036: refused at once (torch 1.13's Gloo and bf16)
            self.lib.ls_end(begun, _error_text(e))  # explains it (a mismatch) and ends the process
            raise
        try:
            future = work.get_future()
        except RuntimeError:  # an engine whose Work has no future: lockstep waits here
            failure = b""
            try:
                work.wait()
            except BaseException as e:  # noqa: B036
                failure = _error_text(e)
            self.lib.ls_end(begun, failure)
            return work
        return self.c10d_c._create_work_from_future(future.then(lambda f: self._ended(begun, f)))

    def _ended(self, begun, future):
        """The program's call has completed (or failed): lockstep checks it (ls_end ends the
        process on a diagnosis or a failure); the program's Work then completes with its value."""
        try:
            value = future.value()
        except BaseException as e:  # noqa: B036
            self.lib.ls_end(begun, _error_text(e))
            raise
        self.lib.ls_end(begun, b"")
        return value

    def done(self, results):
        future = self.torch.futures.Future()
        future.set_result(results)
        return self.c10d_c._create_work_from_future(future)

    def unverified_call(self, name):
        self.unverified[name] = self.unverified.get(name, 0) + 1

    def check_loader(self, loader):
        try:
            n = len(loader)
        except TypeError:  # an iterable-style dataset: no length to compare
            return
        epoch = getattr(getattr(loader, "sampler", None), "epoch", None)
        what = "the DataLoaders' batches in an epoch differ between the ranks at the start of its iteration (%s)" % (
            "epoch %d" % epoch if epoch is not None else "DataLoader iteration")
        self.lib.ls_check_same_count(n, what.encode(), b"batches", self.steps.current())

    def finish(self, failure):
        if self.finished:
            return
        self.finished = True
        digest = rank_digest = -1
        if self.steps.ddp is not None and not failure:
            digest = _parameter_digest(self.steps.ddp.module.parameters())
        elif not failure:
            held = self.steps.optimized_parameters()
            if held:
                rank_digest = _parameter_digest(held)
        for name, n in sorted(self.unverified.items()):
            self.lib.ls_unverified(name.encode(), n)
        code = self.lib.ls_finish(failure.encode(), _failure_step[0] if failure else -1, self.steps.count(), self.steps.rate(),
                                  self.steps.median_duration(), digest, rank_digest)
        if code:
            sys.stderr.write("lockstep: the program never called init_process_group: lockstep verified none of its collectives\n")
            sys.stderr.flush()
            os._exit(code)


def _make_group_class(dist, runtime):
    """LockstepGroup: one of the program's groups (the default one, or one it made), wrapped."""
    import torch._C._distributed_c10d as c10d_c

    ReduceOp = dist.ReduceOp
    reduce_names = {ReduceOp.SUM: "sum", ReduceOp.MAX: "max", ReduceOp.MIN: "min"}
    if hasattr(ReduceOp, "AVG"):
        reduce_names[ReduceOp.AVG] = "avg"

    def reduce_name(opts):
        op = getattr(opts, "reduceOp", ReduceOp.SUM)
        for k, v in reduce_names.items():
            if op == k:
                return v
        return None

    def reduce_label(opts):
        """"product": the reduce op's own name, for a call lockstep does not verify."""
        op = getattr(opts, "reduceOp", opts)
        for name in ("SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "AVG", "PREMUL_SUM"):
            try:
                if hasattr(ReduceOp, name) and op == getattr(ReduceOp, name):
                    return name.lower()
            except (TypeError, RuntimeError):  # a ReduceOp that does not compare (premul_sum's)
                continue
        return "?"

    def one(tensors):
        return tensors[0] if isinstance(tensors, (list, tuple)) else tensors

    def counts(t, splits, size):
        rows = t.size(0) if t.dim() else 1
        row = t.numel() // rows if rows else 0
        splits = list(splits) if splits else [rows // size] * size
        return [s * row for s in splits]

    class CheckedWork(dist.Work):
        """The program's point-to-point Work, checked by lockstep when the program waits for it (the
        engine's send and recv Works have no future to chain a check to)."""

        def __init__(self, work, end, keep):
            super().__init__()
            self._work, self._end, self._keep, self._ended = work, end, keep, False

        def wait(self, timeout=None):
            try:
                out = self._work.wait() if timeout is None else self._work.wait(timeout)
            except BaseException as e:  # noqa: B036
                self._finish(_error_text(e))
                raise
            self._finish(b"")
            return out

        def _finish(self, failure):
            if not self._ended:
                self._ended = True
                self._end(failure)

        def is_completed(self):
            return self._work.is_completed()

        def is_success(self):
            return self._work.is_success()

        def exception(self):
            return self._work.exception()

        def source_rank(self):
            return self._work.source_rank()

        def result(self):
            return self._work.result()

        def synchronize(self):
            return self._work.synchronize()

    class LockstepGroup(dist.ProcessGroup):
        def __init__(self, real, gid=0):
            super().__init__(real.rank(), real.size())
            self._real = real
            self._gid = gid  # lockstep's id of the group (0: the default group; ls_open_group)

        def _carry(self, call, run, results=None):
            return runtime.carry(call, run, results, self._gid)

        def getBackendName(self):
            return "lockstep(%s)" % self._real.name() if hasattr(self._real, "name") else "lockstep"

        def name(self):
            return self.getBackendName()

        def __getattr__(self, attr):  # anything not wrapped goes to the program's own group
            if attr == "_real":
                raise AttributeError(attr)
            return getattr(self._real, attr)

        def _many(self, tensors, op, run):
            if isinstance(tensors, (list, tuple)) and len(tensors) != 1:
                runtime.unverified_call(op + "[%d tensors]" % len(tensors))
                return run()
            return None

        def broadcast(self, tensors, opts=None):
            opts = opts if opts is not None else c10d_c.BroadcastOptions()
            run = lambda: self._real.broadcast(tensors, opts)  # noqa: E731
            w = self._many(tensors, "broadcast", run)
            if w is not None:
                return w
            return self._carry(runtime.describe("broadcast", one(tensors), root=int(opts.rootRank)), run)

        def allreduce(self, tensors, opts=None):
            if opts is None or not hasattr(opts, "reduceOp"):
                o = c10d_c.AllreduceOptions()
                if opts is not None:
                    o.reduceOp = opts
                opts = o
            run = lambda: self._real.allreduce(tensors, opts)  # noqa: E731
            w = self._many(tensors, "all_reduce", run)
            if w is not None:
                return w
            red = reduce_name(opts)
            if red is None:
                runtime.unverified_call("all_reduce(%s)" % reduce_label(opts))
                return run()
            return self._carry(runtime.describe("all_reduce", one(tensors), reduce=red), run)

        def allgather(self, outputs, inputs, opts=None):
            opts = opts if opts is not None else c10d_c.AllgatherOptions()
            run = lambda: self._real.allgather(outputs, inputs, opts)  # noqa: E731
            t = one(inputs)
            outs = outputs[0] if outputs and isinstance(outputs[0], (list, tuple)) else outputs
            if len(inputs) != 1 or len(outs) != self.size() or any(o.numel() != t.numel() for o in outs):
                runtime.unverified_call("all_gather")
                return run()
            # Described as lockstep's all_gather of input count: its output is world_size inputs.
            flat = runtime.torch.empty(0, dtype=t.dtype)
            call = runtime.describe("all_gather", t, out=flat)
            call[0].out_count = t.numel() * self.size()
            return self._carry(call, run)

        def _allgather_base(self, output, input, opts=None):
            opts = opts if opts is not None else c10d_c.AllgatherOptions()
            return self._carry(runtime.describe("all_gather", input, out=output),
                                 lambda: self._real._allgather_base(output, input, opts))

        def all_gather_single(self, output, input, opts=None):
            opts = opts if opts is not None else c10d_c.AllgatherOptions()
            return self._carry(runtime.describe("all_gather", input, out=output),
                                 lambda: self._real.all_gather_single(output, input, opts))

        def _alltoall(self, output, input, out_splits, in_splits, run):
            size = self.size()
            return self._carry(runtime.describe("all_to_all", input, out=output,
                                                  send=counts(input, in_splits, size), recv=counts(output, out_splits, size)), run)

        def alltoall_base(self, output, input, out_splits, in_splits, opts=None):
            opts = opts if opts is not None else c10d_c.AllToAllOptions()
            return self._alltoall(output, input, out_splits, in_splits,
                                  lambda: self._real.alltoall_base(output, input, out_splits, in_splits, opts))

        def all_to_all_single(self, output, input, out_splits, in_splits, opts=None):
            opts = opts if opts is not None else c10d_c.AllToAllOptions()
            return self._alltoall(output, input, out_splits, in_splits,
                                  lambda: self._real.all_to_all_single(output, input, out_splits, in_splits, opts))

        def barrier(self, opts=None):
            opts = opts if opts is not None else c10d_c.BarrierOptions()
            return self._carry(runtime.describe("barrier"), lambda: self._real.barrier(opts))

        def send(self, tensors, dst, tag=0):
            call = runtime.describe("send", one(tensors), root=dst, tag=tag)
            run = lambda: self._real.send(tensors, dst, tag)  # noqa: E731
            w = runtime.p2p(self._gid, call, run, CheckedWork)
            return w if w is not None else self._carry(call, run, list(tensors))

        def recv(self, tensors, src, tag=0):
            t = one(tensors)
            call = runtime.describe("recv", t, out=t, root=src, tag=tag)
            run = lambda: self._real.recv(tensors, src, tag)  # noqa: E731
            w = runtime.p2p(self._gid, call, run, CheckedWork)
            return w if w is not None else self._carry(call, run, list(tensors))

        # The rooted and reducing collectives: each verified by the fields that matter to it (the
        # reduce op, the root, this rank's chunk: dtype and count), as lockstep's table of ops says
        # (harness/comm/types.cpp).
        def _reducing(self, op, chunk, opts, run, root=-1):
            red = reduce_name(opts)
            if red is None:
                runtime.unverified_call("%s(%s)" % (op, reduce_label(opts)))
                return run()
            return self._carry(runtime.describe(op, chunk, reduce=red, root=root), run)

        def reduce_scatter(self, outputs, inputs, opts=None):
            opts = opts if opts is not None else c10d_c.ReduceScatterOptions()
            run = lambda: self._real.reduce_scatter(outputs, inputs, opts)  # noqa: E731
            w = self._many(outputs, "reduce_scatter", run)
            return w if w is not None else self._reducing("reduce_scatter", one(outputs), opts, run)

        def _reduce_scatter_base(self, output, input, opts=None):
            opts = opts if opts is not None else c10d_c.ReduceScatterOptions()
            return self._reducing("reduce_scatter", output, opts, lambda: self._real._reduce_scatter_base(output, input, opts))

        def reduce_scatter_single(self, output, input, opts=None):  # reduce_scatter_tensor's method in torch 2.15
            opts = opts if opts is not None else c10d_c.ReduceScatterOptions()
            return self._reducing("reduce_scatter", output, opts, lambda: self._real.reduce_scatter_single(output, input, opts))

        def gather_single(self, output, input, opts=None):  # a gather into one tensor (torch 2.15)
            opts = opts if opts is not None else c10d_c.GatherOptions()
            return self._carry(runtime.describe("gather", input, root=int(opts.rootRank)),
                                 lambda: self._real.gather_single(output, input, opts))

        def reduce(self, tensors, opts=None):
            opts = opts if opts is not None else c10d_c.ReduceOptions()
            run = lambda: self._real.reduce(tensors, opts)  # noqa: E731
            w = self._many(tensors, "reduce", run)
            return w if w is not None else self._reducing("reduce", one(tensors), opts, run, root=int(opts.rootRank))

        def gather(self, outputs, inputs, opts=None):
            opts = opts if opts is not None else c10d_c.GatherOptions()
            run = lambda: self._real.gather(outputs, inputs, opts)  # noqa: E731
            w = self._many(inputs, "gather", run)
            if w is not None:
                return w
            return self._carry(runtime.describe("gather", one(inputs), root=int(opts.rootRank)), run)

        def scatter(self, outputs, inputs, opts=None):
            opts = opts if opts is not None else c10d_c.ScatterOptions()
            run = lambda: self._real.scatter(outputs, inputs, opts)  # noqa: E731
            w = self._many(outputs, "scatter", run)
            if w is not None:
                return w
            return self._carry(runtime.describe("scatter", one(outputs), root=int(opts.rootRank)), run)

    # Everything else torch may call on a group (its backends, name, device, sequence number,
    # hooks) is the program's group's: the base class's own methods would answer for an empty
    # ProcessGroup.
    for name, attr in list(vars(dist.ProcessGroup).items()) + [(n, getattr(dist.ProcessGroup, n)) for n in dir(dist.ProcessGroup)]:
        if name.startswith("__") or name in LockstepGroup.__dict__ or name in ("rank", "size"):
            continue
        attr = getattr(dist.ProcessGroup, name, None)
        if isinstance(attr, property):
            setattr(LockstepGroup, name, property(lambda self, _name=name: getattr(self._real, _name)))
        elif callable(attr) and not isinstance(attr, type):
            setattr(LockstepGroup, name, lambda self, *a, _name=name, **k: getattr(self._real, _name)(*a, **k))

    for name in ("allreduce_coalesced", "allgather_coalesced", "alltoall", "recv_anysource",
                 "monitored_barrier", "all_gather_single_coalesced", "reduce_scatter_single_coalesced",
                 "allgather_into_tensor_coalesced", "reduce_scatter_tensor_coalesced"):
        if hasattr(dist.ProcessGroup, name):
            def passthrough(self, *a, _name=name, **k):
                runtime.unverified_call(_name)
                return getattr(self._real, _name)(*a, **k)
            setattr(LockstepGroup, name, passthrough)
    return LockstepGroup


def _swap_default_group(c10d, real, wrapper):
    """Makes `wrapper` the default group, registered wherever torch keeps the default group's
    entries."""
    _register_like(c10d, real, wrapper)
    c10d._update_default_pg(wrapper)


def _register_like(c10d, real, wrapper):
    """Registers `wrapper` wherever torch keeps `real`'s entries (its ranks, name, backend), and
    (torch 2.x) under `real`'s name in c10d's registry of groups by name, through which a device
    mesh's get_group() and functional collectives find a group."""
    for d in _holders(c10d):
        if isinstance(d, dict) and real in d:
            d[wrapper] = d[real]
    name = getattr(real, "group_name", None)
    import torch._C._distributed_c10d as c10d_c

    register = getattr(c10d_c, "_register_process_group", None)
    unregister = getattr(c10d_c, "_unregister_process_group", None)
    if name and register is not None and unregister is not None:
        try:
            unregister(name)
            register(name, wrapper)
        except RuntimeError:  # a torch that keeps no such registry for this group
            pass


def _group_ranks(c10d, pg):
    """The global ranks of `pg`, in the group's order."""
    get = getattr(c10d, "get_process_group_ranks", None)
    if get is not None:
        return list(get(pg))
    table = c10d._pg_group_ranks[pg]  # torch 1.13: global rank -> group rank
    return sorted(table, key=table.get)


def _group_name(c10d, pg):
    """The name torch gave `pg`, the same on every member."""
    name = getattr(pg, "group_name", None)
    if name:
        return name
    for d in _holders(c10d):
        v = d.get(pg) if isinstance(d, dict) else None
        if isinstance(v, str):
            return v
    raise RuntimeError("lockstep: torch keeps no name for a process group")


def _wrap_new_group(c10d, runtime, group_class, pg):
    """The program's new group `pg`, wrapped like the default group: its calls are numbered, traced
    and verified as its own, through a Gloo group of lockstep's own over the same ranks."""
    dist = runtime.dist
    if pg is None or pg is getattr(c10d.GroupMember, "NON_GROUP_MEMBER", object()) or runtime.finished or runtime.group is None:
        return pg
    if not isinstance(pg, dist.ProcessGroup) or isinstance(pg, group_class):
        return pg
    ranks = _group_ranks(c10d, pg)
    me = pg.rank()
    store = c10d._get_default_store()
    control = dist.ProcessGroupGloo(dist.PrefixStore("lockstep-control/%s/" % _group_name(c10d, pg), store), me, pg.size())
    gid = runtime.lib.ls_open_group((ctypes.c_int32 * len(ranks))(*ranks), len(ranks), me)
    if gid < 0:
        return pg
    runtime.controls[gid] = control
    wrapper = group_class(pg, gid)
    _register_like(c10d, pg, wrapper)
    return wrapper


def _install_new_group(c10d, dist, runtime, group_class):
    """Every group the program makes after init_process_group (new_group, new_subgroups, a device
    mesh's dimensions, a library's groups) comes back wrapped: torch 2.x makes them all through
    _new_group_with_tag, torch 1.13 through new_group; modules that bound the function by name
    (torch.distributed, its device mesh) get the wrapping one too."""
    name = "_new_group_with_tag" if hasattr(c10d, "_new_group_with_tag") else "new_group"
    make = getattr(c10d, name)

    def wrapped(*args, **kwargs):
        return _wrap_new_group(c10d, runtime, group_class, make(*args, **kwargs))

    wrapped.__doc__, wrapped.__name__ = make.__doc__, make.__name__
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("torch.distributed") and getattr(module, name, None) is make:
            setattr(module, name, wrapped)


def _holders(c10d):
    """The dictionaries in which torch keeps its groups (torch 1.13: module dictionaries _pg_*;
    2.x: the _world object's)."""
    world = getattr(c10d, "_world", None)
    if world is None:
        return [v for k, v in vars(c10d).items() if k.startswith("_pg_") and isinstance(v, dict)]
    out = []
    for n in dir(type(world)):
        if not isinstance(getattr(type(world), n, None), property):
            continue
        try:  # some are computed (pg_config_info) and need the default group
            v = getattr(world, n)
        except Exception:  # noqa: BLE001
            continue
        if isinstance(v, dict):
            out.append(v)
    return out


def _forget_group(c10d, pg):
    for d in _holders(c10d):
        if isinstance(d, dict):
            d.pop(pg, None)


def install():
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
            real = c10d._get_default_group()
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


def _keep_out_of_compile(torch, group_class):
    """torch.compile (torch >= 2.1) must not trace lockstep's group: its methods run eagerly, as
    the program's own group's do (torch.compiler.disable, a public API)."""
    disable = getattr(getattr(torch, "compiler", None), "disable", None)
    if disable is None:
        return
    for name, member in list(vars(group_class).items()):
        if callable(member) and not name.startswith("__"):
            setattr(group_class, name, disable(member))


def _describe_failure(kind, value, tb, steps):
    """"ValueError: bad batch (raised at train.py:44, step 5)": the exception's last line, the
    innermost frame of the program's own code in its traceback, and the program's step."""
    lines = "".join(traceback.format_exception_only(kind, value)).strip().splitlines()
    # The "Type: message" line: the first that names the type (a long message may add lines
    # after it; a SyntaxError puts the source lines before it), else the last.
    names = (kind.__name__, getattr(kind, "__module__", "") + "." + kind.__qualname__)
    line = next((l for l in lines if l.startswith(names)), lines[-1] if lines else kind.__name__)
    site = ""
    for frame, lineno in traceback.walk_tb(tb):
        name = frame.f_code.co_filename
        if _is_program_file(name):
            site = "%s:%d" % (os.path.basename(name), lineno)
    where = [w for w in (("raised at " + site) if site else "", ("step %d" % steps.current()) if steps.current() >= 0 else "") if w]
    return line + (" (%s)" % ", ".join(where) if where else "")


def _report_only(steps, failure):
    """A program on its own backend (wrap = "none"): lockstep only reports its steps."""
    path = os.environ.get("LOCKSTEP_PROGRAM_LIB", "")
    if not path or failure:
        return
    lib = _load_library()
    lib.ls_finish(b"", -1, steps.count(), steps.rate(), steps.median_duration(), -1, -1)


def _install_steps(torch, DistributedDataParallel, steps, runtime):
    """Counts the program's iterations without changing an object it can see: a global module
    forward pre-hook (iteration starts, the DDP module), optimizer step hooks where torch has them
    (>= 2.0), else one counting wrapper on each optimizer class's own step (1.13), which stays a
    plain function so that an optimizer's step stays a bound method (LR schedulers read its
    __self__ and __func__)."""
    import functools
    import importlib

    steps.is_ddp = lambda module: isinstance(module, DistributedDataParallel)
    modules = importlib.import_module("torch.nn.modules.module")
    modules.register_module_forward_pre_hook(lambda module, inputs: steps.forward(module))

    optim = importlib.import_module("torch.optim.optimizer")
    hooks = hasattr(optim, "register_optimizer_step_pre_hook") and hasattr(optim, "register_optimizer_step_post_hook")
    if hooks:
        optim.register_optimizer_step_pre_hook(lambda opt, args, kwargs: steps.optimizer_step_begins())
        optim.register_optimizer_step_post_hook(lambda opt, args, kwargs: steps.optimizer_step_ends(opt))

    optimizer_init = torch.optim.Optimizer.__init__

    @functools.wraps(optimizer_init)
    def counted_init(self, *args, **kwargs):
        optimizer_init(self, *args, **kwargs)
        steps.optimizer_created(self)
        if not hooks:
            _count_class_steps(type(self), steps)

    torch.optim.Optimizer.__init__ = counted_init

    from torch.utils.data import DataLoader

    loader_iter = DataLoader.__iter__

    @functools.wraps(loader_iter)
    def checked_iter(self):
        if runtime is not None and runtime.group is not None and not runtime.finished:
            runtime.check_loader(self)
        it = loader_iter(self)
        return _CountedIterator(it, steps)

    DataLoader.__iter__ = checked_iter


def _count_class_steps(cls, steps):
    """torch 1.13 (no step hooks): wraps the step of cls and of each optimizer class above it that
    defines its own, once; nested steps (a subclass calling super().step()) count once."""
    import functools

    for klass in cls.__mro__:
        step = klass.__dict__.get("step")
        if step is None or getattr(step, "_lockstep_counted", False) or not callable(step):
            continue

        def make(step):
            @functools.wraps(step)
            def counted_step(self, *args, **kwargs):
                steps.optimizer_step_begins()
                try:
                    out = step(self, *args, **kwargs)
                except BaseException:
                    steps.depth = max(0, steps.depth - 1)
                    raise
                steps.optimizer_step_ends(self)
                return out

            counted_step._lockstep_counted = True
            return counted_step

        setattr(klass, "step", make(step))


class _CountedIterator:
    """A DataLoader's iterator that counts the batches it yields (the step of a program without an
    optimizer)."""

    def __init__(self, it, steps):
        self._it, self._steps = it, steps

    def __iter__(self):
        return self

    def __next__(self):
        item = next(self._it)
        self._steps.batch()
        return item

    def __len__(self):
        return len(self._it)

    def __getattr__(self, name):
        return getattr(self._it, name)
