"""The process's one connection to liblockstep_program.so: opens lockstep's rank runtime when the
program's default group exists, describes each call for it, carries the program's calls through
lockstep's chain (ls_begin/ls_end for collectives, ls_p2p_begin/ls_p2p_end for point-to-point
calls, ls_carry where a call must match before it starts), and finishes the rank."""
import ctypes
import os
import sys
import threading
import time
from typing import Any, Callable, List, Optional, Tuple

from . import numerics, torch_private
from .identity import identity
from .binding import _START, _WAIT, _Call, _codes, _error_into, _error_text, _load_library, call_fields
from .sites import _failure_step, program_site
from .steps import _parameter_digest, _Steps

# A call described for liblockstep_program.so: the ls_call, and what it points into (kept alive
# while lockstep reads it).
Described = Tuple[_Call, list]


def _calling(method: Callable[..., Any]) -> Callable[..., Any]:
    """A method of the group that calls lockstep_fast's `method` with the group first."""
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        return method(self, *args, **kwargs)

    call.__name__ = call.__qualname__ = getattr(method, "__name__", "call")
    return call


class _Failed:
    """A call the engine refused when it was started: fails when waited for."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def wait(self) -> None:
        raise self.error


class _Runtime:
    """The process's one connection to liblockstep_program.so."""

    def __init__(self) -> None:
        import torch

        self.torch = torch
        self.lib = _load_library()
        self.fields = call_fields(self.lib)
        self.field_nones = [none for _, none in sorted(self.fields.values())]  # in ls_call's order
        self.fields_type = ctypes.c_int64 * len(self.field_nones)
        self.no_fields = self.fields_type(*self.field_nones)  # a call that sets none of them
        self.ops = _codes(self.lib, "op", ["all_reduce", "all_gather", "all_to_all", "broadcast", "barrier", "send", "recv",
                                           "reduce_scatter", "reduce", "gather", "scatter"])
        self.reduces = _codes(self.lib, "reduce", ["sum", "max", "min", "avg", "product", "band", "bor", "bxor"])
        self.reduce_sum = self.reduces["sum"]
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
        self.rank = 0           # this process's rank in the default group, once it exists
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
        # A collective begun in lockstep's chain is ended (ls_end: checked, its end traced) when the
        # program waits for its Work or finds it completed, on the thread that does, so the engine's
        # thread runs no Python (and never waits for the GIL) when such a call completes; a future
        # the program asks for (DDP's reducer) is chained to the end, which then runs on the
        # engine's thread. Where torch would drop such a Work's Python half (python_work_kept_alive),
        # a wrapped collective returns a Work made from a future chained to lockstep's end instead.
        self.end_at_wait = torch_private.python_work_kept_alive(torch)
        self.work_class = None  # groups.CheckedWork, once the group class is made
        self.outstanding = {}   # the collectives' Works begun and not yet ended, oldest first
        self.outstanding_ids = 0  # the collectives (ls_begin ids) they hold
        self.outstanding_lock = threading.Lock()
        # Held from the room counted (_room_for) to the call's Work in `outstanding`: two threads
        # issuing at once (DDP's autograd thread beside the main one) never begin more collectives
        # than program.cpp lets be in flight, where ls_begin would wait for an end only a wait here
        # can give.
        self.issue_lock = threading.RLock()
        self.fast = None        # lockstep_fast (fast.py), once open() has loaded it where it is built
        self.group_class = None  # groups.LockstepGroup, once made
        self.start_cb = _START(self._start)
        self.wait_cb = _WAIT(self._wait)

    # The callbacks liblockstep_program.so runs the calls through (program.h).
    def _start(self, group: int, token: int, call: Any, err: Any, errlen: int) -> int:
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

    def _wait(self, handle: int, err: Any, errlen: int) -> int:
        try:
            work = self.works.pop(handle)
            if work is not None:
                work.wait()
            return 0
        except BaseException as e:  # noqa: B036
            _error_into(err, errlen, e)
            return 1

    def _host_tensor(self, ptr: int, count: int, dtype_code: int) -> Any:
        torch = self.torch
        dtype = self.dtype_of_code[dtype_code]
        size = count * torch.empty((), dtype=dtype).element_size()
        if count == 0 or not ptr:
            return torch.empty(0, dtype=dtype)
        return torch.frombuffer((ctypes.c_char * size).from_address(ptr), dtype=dtype)

    def _run_raw(self, c: _Call, pg: Any) -> Any:
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
            return pg.send([t_in], self.field(c, "peer"), self.field(c, "tag"))
        if c.op == self.ops["recv"]:
            return pg.recv([t_in], self.field(c, "peer"), self.field(c, "tag"))
        if c.op == self.ops["all_reduce"]:
            return pg.allreduce([t_in])
        raise RuntimeError("lockstep: no raw path for op %d" % c.op)

    def open(self, real: Any) -> None:
        import torch._C._distributed_c10d as c10d_c
        import torch.distributed as dist

        self.c10d_c = c10d_c
        self.dist = dist
        self.real = real
        self.rank, self.size = real.rank(), real.size()
        store = torch_private.default_store(dist)
        self.control = dist.ProcessGroupGloo(dist.PrefixStore("lockstep-control/", store), self.rank, self.size)
        self.controls[0] = self.control
        err = ctypes.create_string_buffer(1024)
        if self.lib.ls_open(self.rank, self.size, identity(self.torch).encode(), self.start_cb, self.wait_cb, err, 1024) != 0:
            raise RuntimeError("lockstep: " + err.value.decode(errors="replace"))
        self._open_fast()

    def _open_fast(self) -> None:
        """Loads lockstep_fast where it is built for this torch (fast.py) and hands it the library's
        entry points and codes, this runtime and the call-site rule: it makes the group class's most
        frequent collectives C++ methods (groups.py)."""
        from . import fast  # here, not at the package's import: `python -m lockstep_torch.fast` runs it as a script

        module = fast.load(self.torch)
        if module is None or self.group_class is None:
            return
        from . import sites

        root = self.fields.get("root", (-1, 0))[0]
        methods = module.install(self, ctypes.cast(self.lib.ls_begin, ctypes.c_void_p).value,
                                 ctypes.cast(self.lib.ls_end, ctypes.c_void_p).value, list(self.field_nones), root, self.ops,
                                 [(self.torch.empty(0, dtype=dt), code) for dt, code in self.dtype_code.items()], self.reduces,
                                 sites)
        for name, method in methods.items():
            # A Python function of one line: c10d's trampoline (through which DDP's reducer and
            # TorchRec call) ignores a method that is a C++ function.
            setattr(self.group_class, "_slow_" + name, getattr(self.group_class, name))
            setattr(self.group_class, name, _calling(method))
        self.fast = module

    def field(self, c: _Call, name: str) -> int:
        """The value of the call field `name` (ls_call_fields) in `c`."""
        return int(c.fields[self.fields[name][0]])

    def describe(self, op: str, tensor: Any = None, out: Any = None, reduce: Optional[str] = None,
                 send: Optional[List[int]] = None, recv: Optional[List[int]] = None, **fields: int) -> Described:
        """The ls_call of a call; `fields` are the call-field table's (root=, peer=, tag=, ...), the
        others left at the table's `none`."""
        c = _Call()
        c.op = self.ops[op]
        if fields:
            values = list(self.field_nones)
            for name, v in fields.items():
                if name not in self.fields:
                    raise TypeError("lockstep: no call field %r (liblockstep_program.so has %s)" % (name, ", ".join(self.fields)))
                values[self.fields[name][0]] = int(v)
            arr = self.fields_type(*values)
        else:
            arr = self.no_fields  # read only, by the library, while it copies the call
        c.nfields, c.fields = len(self.field_nones), arr
        c.reduce = self.reduces[reduce] if reduce else self.reduce_sum
        keep = [arr]
        if tensor is not None:
            tensor = self._view(op, c, tensor, keep)
            c.inp, c.in_count = tensor.data_ptr(), tensor.numel()
        if out is not None:
            out = self._view(op, c, out, keep)
            c.out, c.out_count = out.data_ptr(), out.numel()
        if tensor is None and out is not None:
            c.inp, c.in_count = None, 0
        if send is not None:
            n = len(send)
            s_arr, r_arr = (ctypes.c_int64 * n)(*send), (ctypes.c_int64 * n)(*recv)
            keep += [s_arr, r_arr]
            c.nsplits, c.send_counts, c.recv_counts = n, s_arr, r_arr
        return c, keep

    def _view(self, op: str, c: _Call, t: Any, keep: list) -> Any:
        """`t` as the call reads it (contiguous, kept alive in `keep` when copied); sets c's dtype
        and device from it."""
        if not t.is_contiguous():
            t = t.contiguous()
            keep.append(t)
        code = self.dtype_code.get(t.dtype)
        if code is None:
            raise TypeError("lockstep: %s of dtype %s is not supported" % (op, t.dtype))
        c.dtype = code
        if t.is_cuda:
            c.device = 1
        return t

    def carry(self, call: Described, run: Callable[[], Any], results: Optional[list] = None, group: int = 0) -> Any:
        """Runs the program's call `run` (which starts it on the program's group and returns its
        Work) under lockstep. A collective is begun in lockstep's chain, started, and returned at
        once as a Work that completes when the call has completed and lockstep has checked it
        (CheckedWork, when the program waits for it; else _ended, on the engine's thread): the
        program goes on meanwhile, as on its own group (DDP's
        all-reduce of a bucket runs while its backward pass computes the next; FSDP2's next
        all-gather while this layer computes), with several calls in flight on any groups. Otherwise (a
        point-to-point call, `results` given; or ls_begin declines) lockstep carries the call to
        its end and returns a completed Work whose future holds `results` (Gloo's send and recv
        works cannot be waited twice) or the program's own Work, complete."""
        c, keep = call  # keep: what c points into, alive while lockstep reads it
        site, step = program_site().encode(), self.steps.current()
        if results is None:
            with self.issue_lock:
                self._room_for(1)
                begun = self.lib.ls_begin(group, ctypes.byref(c), site, step)
                if begun >= 0:
                    return self._begun([begun], run)
            if self.finished:
                return run()
        with self.issue_lock:  # no collective begins between the settle and ls_carry's drain
            self.settle()  # ls_carry waits until every collective begun has ended
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

    # The most members of one coalesced call lockstep verifies (each is a collective in flight;
    # program.cpp lets 16 be in flight at once).
    MAX_MEMBERS = 16

    def carry_members(self, calls: Optional[List[Described]], run: Callable[[], Any], group: int = 0) -> Any:
        """A coalesced call (allreduce_coalesced, allgather_into_tensor_coalesced, ...): each member
        is begun in lockstep's chain as a collective of its own, in order, from the same site, and
        the program's one call `run` carries them all; its Work completes when the call has
        completed and lockstep has checked every member. Should ls_begin decline them, each member
        is carried to its end in turn and the last one starts the program's call. None when
        lockstep does not verify them
        (more than MAX_MEMBERS, or lockstep no longer carries calls): the caller names the call
        unverified and runs it."""
        if not calls or len(calls) > self.MAX_MEMBERS or self.finished:
            return None
        site, step = program_site().encode(), self.steps.current()
        with self.issue_lock:
            self._room_for(len(calls))
            ids = []
            for c, keep in calls:
                begun = self.lib.ls_begin(group, ctypes.byref(c), site, step)
                if begun < 0:
                    break
                ids.append(begun)
            if len(ids) == len(calls):
                return self._begun(ids, run)
        if ids:  # cannot happen: lockstep begins every call or none
            raise RuntimeError("lockstep: a coalesced call was begun in part")
        work = None
        for k, call in enumerate(calls):
            work = self.carry(call, run if k == len(calls) - 1 else (lambda: self.done([])), None, group)
        return work

    def p2p(self, group: int, call: Described, run: Callable[[], Any], checked_work: Callable[..., Any]) -> Any:
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

    def _begun(self, ids: List[int], run: Callable[[], Any]) -> Any:
        """Starts the program's call, begun in lockstep's chain as the collectives `ids` (one, or
        each member of a coalesced call); its Work, ended by _ended."""
        def end(failure: bytes) -> None:
            for begun in ids:
                self.lib.ls_end(begun, failure)

        try:
            work = run()
        except BaseException as e:  # noqa: B036: refused at once (torch 1.13's Gloo and bf16)
            end(_error_text(e))  # explains it (a mismatch) and ends the process
            raise
        if work is None:  # a call the engine ran to its end and gave no Work for (NCCL's synchronous coalesced calls)
            end(b"")
            return None
        if self.end_at_wait and self.work_class is not None:
            return self.work_class(work, end, None, self, len(ids))
        try:
            future = work.get_future()
        except RuntimeError:  # an engine whose Work has no future: lockstep waits here
            failure = b""
            try:
                work.wait()
            except BaseException as e:  # noqa: B036
                failure = _error_text(e)
            end(failure)
            return work
        return torch_private.work_from_future(self.c10d_c, future.then(lambda f: self._ended(end, f)))

    def _ended(self, end: Callable[[bytes], None], future: Any) -> Any:
        """The program's call has completed (or failed): lockstep checks it (ls_end ends the
        process on a diagnosis or a failure); the program's Work then completes with its value."""
        try:
            value = future.value()
        except BaseException as e:  # noqa: B036
            end(_error_text(e))
            raise
        end(b"")
        return value

    # At most this many collectives begun and not ended (program.cpp's kMaxCollectivesInFlight: its
    # ls_begin waits for an ls_end beyond it, which only the program's own waits give here).
    MAX_IN_FLIGHT = 16

    def _room_for(self, n: int) -> None:
        """Before `n` collectives are begun: the program's Works it has not waited for yet are ended
        as they complete, in any order (as ls_begin itself would wait for any to end), until the
        `n` fit."""
        if self.in_flight() + n > self.MAX_IN_FLIGHT:
            self.settle(self.MAX_IN_FLIGHT - n)

    def in_flight(self) -> int:
        """The collectives begun and not yet ended, here and in lockstep_fast."""
        return self.outstanding_ids + (self.fast.outstanding() if self.fast is not None else 0)

    def settle(self, keep: int = 0) -> None:
        """Ends the collectives begun and not yet ended, each as it completes, whichever first (one
        on another group may need this rank's later calls; every one was started, so each completes
        as it would have), until they hold at most `keep` calls. Before anything of lockstep's that
        waits for every begun collective to end (ls_carry, a new group, the DataLoader check, the
        end of the program), with issue_lock held there so that none begins meanwhile."""
        while self.in_flight() > keep:
            with self.outstanding_lock:
                works = list(self.outstanding.values())
            for work in works:
                work.is_completed()  # ends it when it has completed
            if self.fast is not None:
                self.fast.poll()  # ends those of lockstep_fast that have completed
            if self.in_flight() > keep:
                time.sleep(1e-4)

    def done(self, results: list) -> Any:
        future = self.torch.futures.Future()
        future.set_result(results)
        return torch_private.work_from_future(self.c10d_c, future)

    def unverified_call(self, name: str) -> None:
        self.unverified[name] = self.unverified.get(name, 0) + 1

    def check_loader(self, loader: Any) -> None:
        try:
            n = len(loader)
        except TypeError:  # an iterable-style dataset: no length to compare
            return
        epoch = getattr(getattr(loader, "sampler", None), "epoch", None)
        what = "the DataLoaders' batches in an epoch differ between the ranks at the start of its iteration (%s)" % (
            "epoch %d" % epoch if epoch is not None else "DataLoader iteration")
        with self.issue_lock:
            self.settle()  # ls_check_same_count waits for every begun collective to end
            self.lib.ls_check_same_count(n, what.encode(), b"batches", self.steps.current())

    def finish(self, failure: str) -> None:
        with self.issue_lock:  # no collective begins between the settle and ls_finish's drain
            self._finish(failure)

    def _finish(self, failure: str) -> None:
        if self.finished:
            return
        if not failure:
            self.settle()  # ls_finish waits for every begun collective to end
        self.finished = True
        digest = rank_digest = -1
        if self.steps.ddp is not None and not failure:
            # The parameters DDP replicates, and this rank's own of those it was told to ignore
            # (a model-parallel part: TorchRec's sharded tables under DistributedModelParallel).
            ddp = self.steps.ddp
            ignored = set(getattr(ddp, "parameters_to_ignore", None) or ())
            named = list(ddp.module.named_parameters())
            digest = _parameter_digest(p for n, p in named if n not in ignored)
            own = [p for n, p in named if n in ignored]
            if own:
                rank_digest = _parameter_digest(own)
            # The replicas once (rank 0's), each rank's own under its rank.
            numerics.write_quietly([(n, p) for n, p in named if n not in ignored and self.rank == 0] +
                                   [("rank%d/%s" % (self.rank, n), p) for n, p in named if n in ignored])
        elif not failure:
            held = self.steps.optimized_parameters()
            if held:
                rank_digest = _parameter_digest(held)
                names = numerics.parameter_names(self.torch)
                numerics.write_quietly(("rank%d/%s" % (self.rank, names.get(id(p), "param%d" % i)), p)
                                       for i, p in enumerate(held))
        for name, n in sorted(self.unverified.items()):
            self.lib.ls_unverified(name.encode(), n)
        if self.fast is not None:
            self.lib.ls_metric(b"fast_calls", float(self.fast.calls()))
        code = self.lib.ls_finish(failure.encode(), _failure_step[0] if failure else -1, self.steps.count(), self.steps.rate(),
                                  self.steps.median_duration(), digest, rank_digest)
        if code:
            sys.stderr.write("lockstep: the program never called init_process_group: lockstep verified none of its collectives\n")
            sys.stderr.flush()
            os._exit(code)
