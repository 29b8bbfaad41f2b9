"""LockstepGroup: each of the program's process groups (the default one, and every group it makes
after it), wrapped in a torch.distributed.ProcessGroup subclass (c10d's PyProcessGroup trampoline,
through which DDP's C++ reducer calls too) whose methods hand each call to lockstep's runtime with
the fields that matter to it; and the wrapping of groups made with new_group."""
import ctypes
import sys
from typing import Any, Callable, List, Optional

# What c10d hands a group's methods (torch is not imported at this module's load): a tensor, a list
# of them, a Work; a call described for lockstep (runtime.Described).
Tensor = Any
Tensors = List[Any]
Work = Any
Described = Any

from . import torch_private
from .binding import _error_text


def _make_group_class(dist: Any, runtime: Any) -> type:
    """LockstepGroup: one of the program's groups (the default one, or one it made), wrapped."""
    import torch._C._distributed_c10d as c10d_c

    ReduceOp = dist.ReduceOp
    reduce_names = {ReduceOp.SUM: "sum", ReduceOp.MAX: "max", ReduceOp.MIN: "min", ReduceOp.PRODUCT: "product",
                    ReduceOp.BAND: "band", ReduceOp.BOR: "bor", ReduceOp.BXOR: "bxor"}
    if hasattr(ReduceOp, "AVG"):
        reduce_names[ReduceOp.AVG] = "avg"

    def reduce_name(opts: Any) -> Optional[str]:
        op = getattr(opts, "reduceOp", ReduceOp.SUM)
        for k, v in reduce_names.items():
            if op == k:
                return v
        return None

    def reduce_label(opts: Any) -> str:
        """"product": the reduce op's own name, for a call lockstep does not verify."""
        op = getattr(opts, "reduceOp", opts)
        for name in ("SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "AVG", "PREMUL_SUM"):
            try:
                if hasattr(ReduceOp, name) and op == getattr(ReduceOp, name):
                    return name.lower()
            except (TypeError, RuntimeError):  # a ReduceOp that does not compare (premul_sum's)
                continue
        return "?"

    def one(tensors: Tensors) -> Tensor:
        return tensors[0] if isinstance(tensors, (list, tuple)) else tensors

    def counts(t: Tensor, splits: Optional[List[int]], size: int) -> List[int]:
        rows = t.size(0) if t.dim() else 1
        row = t.numel() // rows if rows else 0
        splits = list(splits) if splits else [rows // size] * size
        return [s * row for s in splits]

    class CheckedWork(dist.Work):
        """The program's Work, checked by lockstep when the program waits for it or finds it
        completed, on the thread that does, or (a future asked for) on the engine's thread when it
        completes: a point-to-point call (the engine's
        send and recv Works have no future to chain a check to) or, where torch keeps a Python Work
        alive (torch_private.python_work_kept_alive), a collective begun in lockstep's chain
        (`runtime` given: held in runtime.outstanding until it is ended, as `calls` collectives)."""

        def __init__(self, work: Work, end: Callable[[bytes], None], keep: Any, runtime: Any = None, calls: int = 0) -> None:
            super().__init__()
            self._work, self._end, self._keep = work, end, keep
            self._once = [True]  # popped by the one _finish that ends the call (on any thread)
            self._runtime, self._calls = runtime, calls
            if runtime is not None:
                with runtime.outstanding_lock:
                    runtime.outstanding[id(self)] = self
                    runtime.outstanding_ids += calls

        def wait(self, timeout: Optional[Any] = None) -> Any:
            try:
                out = self._work.wait() if timeout is None else self._work.wait(timeout)
            except BaseException as e:  # noqa: B036
                if timeout is not None and self._runtime is not None and not self._work.is_completed():
                    raise  # the program's own timeout: the collective may still complete
                self._finish(_error_text(e))
                raise
            self._finish(b"")
            return out

        def get_future(self) -> Any:
            """The program's call's future, completing once lockstep has checked the call (DDP's
            reducer chains its buckets to it)."""
            return self._work.get_future().then(self._then)

        def _then(self, future: Any) -> Any:
            try:
                value = future.value()
            except BaseException as e:  # noqa: B036
                self._finish(_error_text(e))
                raise
            self._finish(b"")
            return value

        def _finish(self, failure: bytes) -> None:
            try:
                self._once.pop()  # atomic: one thread ends the call
            except IndexError:
                return
            rt = self._runtime
            if rt is not None:
                with rt.outstanding_lock:
                    rt.outstanding.pop(id(self), None)
                    rt.outstanding_ids -= self._calls
            self._end(failure)

        def is_completed(self) -> bool:
            done = self._work.is_completed()
            if done and self._once and self._runtime is not None:
                # A collective found completed is checked now (a send or receive cannot be waited
                # for twice: it is checked when the program waits for it).
                try:
                    self.wait()
                except Exception:  # noqa: BLE001: _finish has handed the failure to lockstep
                    pass
            return done

        def is_success(self) -> bool:
            return self._work.is_success()

        def exception(self) -> Any:
            return self._work.exception()

        def source_rank(self) -> int:
            return self._work.source_rank()

        def _source_rank(self) -> int:  # torch 2.x's name
            return self._work._source_rank() if hasattr(self._work, "_source_rank") else self._work.source_rank()

        def result(self) -> Any:
            return self._work.result()

        def synchronize(self) -> None:
            return self._work.synchronize()

    runtime.work_class = CheckedWork

    class LockstepGroup(dist.ProcessGroup):
        def __init__(self, real: Any, gid: int = 0) -> None:
            super().__init__(real.rank(), real.size())
            self._rank, self._size = real.rank(), real.size()
            self._real = real
            self._gid = gid  # lockstep's id of the group (0: the default group; ls_open_group)

        def _carry(self, call: Described, run: Callable[[], Work], results: Optional[list] = None) -> Work:
            return runtime.carry(call, run, results, self._gid)

        def getBackendName(self) -> str:
            return "lockstep(%s)" % self._real.name() if hasattr(self._real, "name") else "lockstep"

        def name(self) -> str:
            return self.getBackendName()

        # The rank and size, under both names, which TorchRec asks for dozens of times a step:
        # answered here (the values the group was made with) rather than through c10d's trampoline
        # back into this class, or __getattr__'s miss.
        def size(self) -> int:
            return self._size

        def rank(self) -> int:
            return self._rank

        def getSize(self) -> int:
            return self._size

        def getRank(self) -> int:
            return self._rank

        def __getattr__(self, attr: str) -> Any:  # anything not wrapped goes to the program's own group
            if attr == "_real":
                raise AttributeError(attr)
            return getattr(self._real, attr)

        def _many(self, tensors: Tensors, op: str, run: Callable[[], Work]) -> Optional[Work]:
            if isinstance(tensors, (list, tuple)) and len(tensors) != 1:
                runtime.unverified_call(op + "[%d tensors]" % len(tensors))
                return run()
            return None

        # Where lockstep_fast is built (runtime.fast), it makes allreduce, broadcast, all_to_all_single,
        # all_gather_single and reduce_scatter_single C++ methods, keeping these as `_slow_<name>`:
        # they run the calls it does not describe the same way.
        def broadcast(self, tensors: Tensors, opts: Optional[Any] = None) -> Work:
            opts = opts if opts is not None else c10d_c.BroadcastOptions()
            run = lambda: self._real.broadcast(tensors, opts)  # noqa: E731
            w = self._many(tensors, "broadcast", run)
            if w is not None:
                return w
            return self._carry(runtime.describe("broadcast", one(tensors), root=int(opts.rootRank)), run)

        def allreduce(self, tensors: Tensors, opts: Optional[Any] = None) -> Work:
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

        def allgather(self, outputs: Tensors, inputs: Tensors, opts: Optional[Any] = None) -> Work:
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

        def _allgather_base(self, output: Tensor, input: Tensor, opts: Optional[Any] = None) -> Work:
            opts = opts if opts is not None else c10d_c.AllgatherOptions()
            return self._carry(runtime.describe("all_gather", input, out=output),
                                 lambda: self._real._allgather_base(output, input, opts))

        def all_gather_single(self, output: Tensor, input: Tensor, opts: Optional[Any] = None) -> Work:
            opts = opts if opts is not None else c10d_c.AllgatherOptions()
            return self._carry(runtime.describe("all_gather", input, out=output),
                                 lambda: self._real.all_gather_single(output, input, opts))

        def _alltoall(self, output: Tensor, input: Tensor, out_splits: Optional[List[int]], in_splits: Optional[List[int]], run: Callable[[], Work]) -> Work:
            size = self.size()
            return self._carry(runtime.describe("all_to_all", input, out=output,
                                                  send=counts(input, in_splits, size), recv=counts(output, out_splits, size)), run)

        def alltoall_base(self, output: Tensor, input: Tensor, out_splits: Optional[List[int]], in_splits: Optional[List[int]], opts: Optional[Any] = None) -> Work:
            opts = opts if opts is not None else c10d_c.AllToAllOptions()
            return self._alltoall(output, input, out_splits, in_splits,
                                  lambda: self._real.alltoall_base(output, input, out_splits, in_splits, opts))

        def all_to_all_single(self, output: Tensor, input: Tensor, out_splits: Optional[List[int]], in_splits: Optional[List[int]], opts: Optional[Any] = None) -> Work:
            opts = opts if opts is not None else c10d_c.AllToAllOptions()
            return self._alltoall(output, input, out_splits, in_splits,
                                  lambda: self._real.all_to_all_single(output, input, out_splits, in_splits, opts))

        def barrier(self, opts: Optional[Any] = None) -> Work:
            opts = opts if opts is not None else c10d_c.BarrierOptions()
            return self._carry(runtime.describe("barrier"), lambda: self._real.barrier(opts))

        def send(self, tensors: Tensors, dst: int, tag: int = 0) -> Work:
            call = runtime.describe("send", one(tensors), peer=dst, tag=tag)
            run = lambda: self._real.send(tensors, dst, tag)  # noqa: E731
            w = runtime.p2p(self._gid, call, run, CheckedWork)
            return w if w is not None else self._carry(call, run, list(tensors))

        def recv_anysource(self, tensors: Tensors, tag: int = 0) -> Work:
            """A receive from any rank: the sender is known once it has arrived, so lockstep receives
            its record then (from that rank) and compares it, before the program's wait returns."""
            t = one(tensors)
            work = self._real.recv_anysource(tensors, tag)
            gid = self._gid

            def end(failure: bytes) -> None:
                if failure:
                    return
                src = work._source_rank() if hasattr(work, "_source_rank") else work.source_rank()
                w = runtime.p2p(gid, runtime.describe("recv", t, out=t, peer=int(src), tag=tag), lambda: runtime.done([]), CheckedWork)
                if w is not None:
                    w.wait()
                else:
                    runtime.unverified_call("recv_anysource")

            return CheckedWork(work, end, None)

        def monitored_barrier(self, *args, **kwargs) -> None:
            """Gloo's barrier that names the ranks that did not reach it: verified as a barrier (its
            call site on every rank), then run as the program asked; it returns when it has."""
            def run() -> Work:
                self._real.monitored_barrier(*args, **kwargs)
                return runtime.done([])

            self._carry(runtime.describe("barrier"), run).wait()

        def recv(self, tensors: Tensors, src: int, tag: int = 0) -> Work:
            t = one(tensors)
            call = runtime.describe("recv", t, out=t, peer=src, tag=tag)
            run = lambda: self._real.recv(tensors, src, tag)  # noqa: E731
            w = runtime.p2p(self._gid, call, run, CheckedWork)
            return w if w is not None else self._carry(call, run, list(tensors))

        # The rooted and reducing collectives: each verified by the fields that matter to it (the
        # reduce op, the root, this rank's chunk: dtype and count), as lockstep's table of ops says
        # (harness/comm/types.cpp).
        def _reducing(self, op: str, chunk: Tensor, opts: Any, run: Callable[[], Work], root: int = -1) -> Work:
            red = reduce_name(opts)
            if red is None:
                runtime.unverified_call("%s(%s)" % (op, reduce_label(opts)))
                return run()
            return self._carry(runtime.describe(op, chunk, reduce=red, root=root), run)

        def reduce_scatter(self, outputs: Tensors, inputs: Tensors, opts: Optional[Any] = None) -> Work:
            opts = opts if opts is not None else c10d_c.ReduceScatterOptions()
            run = lambda: self._real.reduce_scatter(outputs, inputs, opts)  # noqa: E731
            w = self._many(outputs, "reduce_scatter", run)
            return w if w is not None else self._reducing("reduce_scatter", one(outputs), opts, run)

        def _reduce_scatter_base(self, output: Tensor, input: Tensor, opts: Optional[Any] = None) -> Work:
            opts = opts if opts is not None else c10d_c.ReduceScatterOptions()
            return self._reducing("reduce_scatter", output, opts, lambda: self._real._reduce_scatter_base(output, input, opts))

        def reduce_scatter_single(self, output: Tensor, input: Tensor, opts: Optional[Any] = None) -> Work:  # reduce_scatter_tensor's method in torch 2.15
            opts = opts if opts is not None else c10d_c.ReduceScatterOptions()
            return self._reducing("reduce_scatter", output, opts, lambda: self._real.reduce_scatter_single(output, input, opts))

        def gather_single(self, output: Tensor, input: Tensor, opts: Optional[Any] = None) -> Work:  # a gather into one tensor (torch 2.15)
            opts = opts if opts is not None else c10d_c.GatherOptions()
            return self._carry(runtime.describe("gather", input, root=int(opts.rootRank)),
                                 lambda: self._real.gather_single(output, input, opts))

        def reduce(self, tensors: Tensors, opts: Optional[Any] = None) -> Work:
            opts = opts if opts is not None else c10d_c.ReduceOptions()
            run = lambda: self._real.reduce(tensors, opts)  # noqa: E731
            w = self._many(tensors, "reduce", run)
            return w if w is not None else self._reducing("reduce", one(tensors), opts, run, root=int(opts.rootRank))

        def gather(self, outputs: Tensors, inputs: Tensors, opts: Optional[Any] = None) -> Work:
            opts = opts if opts is not None else c10d_c.GatherOptions()
            run = lambda: self._real.gather(outputs, inputs, opts)  # noqa: E731
            w = self._many(inputs, "gather", run)
            if w is not None:
                return w
            return self._carry(runtime.describe("gather", one(inputs), root=int(opts.rootRank)), run)

        def scatter(self, outputs: Tensors, inputs: Tensors, opts: Optional[Any] = None) -> Work:
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

    # Coalesced calls: each member verified as a collective of its own (runtime.carry_members),
    # the program's one call carrying them all. torch 2.15 names two of them twice.
    def _members(self, name: str, calls: Optional[List[Described]], run: Callable[[], Work]) -> Work:
        w = runtime.carry_members(calls, run, self._gid) if calls is not None else None
        if w is None:
            runtime.unverified_call(name)
            return run()
        return w

    def allreduce_coalesced(self, tensors: Tensors, opts: Optional[Any] = None) -> Work:
        opts = opts if opts is not None else c10d_c.AllreduceCoalescedOptions()
        red = reduce_name(opts)
        calls = [runtime.describe("all_reduce", t, reduce=red) for t in tensors] if red is not None else None
        return self._members("allreduce_coalesced" if red is not None else "allreduce_coalesced(%s)" % reduce_label(opts),
                             calls, lambda: self._real.allreduce_coalesced(tensors, opts))

    def allgather_coalesced(self, output_lists: List[Tensors], input_list: Tensors, opts: Optional[Any] = None) -> Work:
        opts = opts if opts is not None else c10d_c.AllgatherOptions()
        # output_lists[r][i]: rank r's part of input i. A layout Gloo refuses runs unverified (and fails).
        calls = None
        if len(output_lists) == self.size() and all(len(outs) == len(input_list) for outs in output_lists):
            calls = []
            for i, t in enumerate(input_list):
                if any(outs[i].numel() != t.numel() for outs in output_lists):
                    calls = None
                    break
                call = runtime.describe("all_gather", t, out=runtime.torch.empty(0, dtype=t.dtype))
                call[0].out_count = t.numel() * self.size()
                calls.append(call)
        return self._members("allgather_coalesced", calls, lambda: self._real.allgather_coalesced(output_lists, input_list, opts))

    def _allgather_tensors(self, name: str, outputs: Tensors, inputs: Tensors, opts: Optional[Any] = None) -> Work:
        opts = opts if opts is not None else c10d_c.AllgatherOptions()
        calls = [runtime.describe("all_gather", i, out=o) for o, i in zip(outputs, inputs)] if len(outputs) == len(inputs) else None
        return self._members(name, calls, lambda: getattr(self._real, name)(outputs, inputs, opts))

    def _reduce_scatter_tensors(self, name: str, outputs: Tensors, inputs: Tensors, opts: Optional[Any] = None) -> Work:
        opts = opts if opts is not None else c10d_c.ReduceScatterOptions()
        red = reduce_name(opts)
        calls = None
        if red is not None and len(outputs) == len(inputs):
            calls = [runtime.describe("reduce_scatter", o, reduce=red) for o in outputs]
        return self._members(name if red is not None else "%s(%s)" % (name, reduce_label(opts)), calls,
                             lambda: getattr(self._real, name)(outputs, inputs, opts))

    LockstepGroup._members = _members
    # Called only from the methods above (torch_private._keep_out_of_compile leaves them unwrapped).
    # rank, size, getSize and getRank issue no call: nothing to keep out of a compiled graph.
    LockstepGroup._lockstep_helpers = frozenset({"_carry", "_many", "_reducing", "_alltoall", "_members", "getSize", "getRank",
                                                 "rank", "size"})
    LockstepGroup.allreduce_coalesced = allreduce_coalesced
    LockstepGroup.allgather_coalesced = allgather_coalesced
    for name in ("allgather_into_tensor_coalesced", "all_gather_single_coalesced"):
        if hasattr(dist.ProcessGroup, name):
            setattr(LockstepGroup, name, lambda self, o, i, opts=None, _n=name: _allgather_tensors(self, _n, o, i, opts))
    for name in ("reduce_scatter_tensor_coalesced", "reduce_scatter_single_coalesced"):
        if hasattr(dist.ProcessGroup, name):
            setattr(LockstepGroup, name, lambda self, o, i, opts=None, _n=name: _reduce_scatter_tensors(self, _n, o, i, opts))

    for name in ("alltoall",):
        if hasattr(dist.ProcessGroup, name):
            def passthrough(self, *a, _name=name, **k) -> Work:
                runtime.unverified_call(_name)
                return getattr(self._real, _name)(*a, **k)
            setattr(LockstepGroup, name, passthrough)
    runtime.group_class = LockstepGroup
    return LockstepGroup


def _wrap_new_group(c10d: Any, runtime: Any, group_class: type, pg: Any) -> Any:
    """The program's new group `pg`, wrapped like the default group: its calls are numbered, traced
    and verified as its own (on the board, or through a Gloo group of lockstep's own over the same
    ranks, made here, for ranks on several hosts)."""
    dist = runtime.dist
    if pg is None or pg is getattr(c10d.GroupMember, "NON_GROUP_MEMBER", object()) or runtime.finished or runtime.group is None:
        return pg
    if not isinstance(pg, dist.ProcessGroup) or isinstance(pg, group_class):
        return pg
    ranks = torch_private._group_ranks(c10d, pg)
    me = pg.rank()
    store = torch_private.default_store(runtime.dist)
    control = dist.ProcessGroupGloo(dist.PrefixStore("lockstep-control/%s/" % torch_private._group_name(c10d, pg), store), me, pg.size())
    with runtime.issue_lock:  # no collective begins between the settle and ls_open_group's drain
        runtime.settle()  # ls_open_group waits for every begun collective to end
        gid = runtime.lib.ls_open_group((ctypes.c_int32 * len(ranks))(*ranks), len(ranks), me)
    if gid < 0:
        return pg
    runtime.controls[gid] = control
    wrapper = group_class(pg, gid)
    torch_private._register_like(c10d, pg, wrapper)
    return wrapper


def _install_new_group(c10d: Any, dist: Any, runtime: Any, group_class: type) -> None:
    """Every group the program makes after init_process_group (new_group, new_subgroups, a device
    mesh's dimensions, a library's groups) comes back wrapped: torch 2.x makes them all through
    _new_group_with_tag, torch 1.13 through new_group; modules that bound the function by name
    (torch.distributed, its device mesh) get the wrapping one too."""
    name = "_new_group_with_tag" if hasattr(c10d, "_new_group_with_tag") else "new_group"
    make = getattr(c10d, name)

    def wrapped(*args, **kwargs) -> Any:
        return _wrap_new_group(c10d, runtime, group_class, make(*args, **kwargs))

    wrapped.__doc__, wrapped.__name__ = make.__doc__, make.__name__
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("torch.distributed") and getattr(module, name, None) is make:
            setattr(module, name, wrapped)
