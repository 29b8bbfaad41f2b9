"""The program's steps (lockstep_torch's docstring says how they are counted), its throughput, and
the digest of its parameters, counted without changing an object the program can see: a global
module forward pre-hook, optimizer step hooks (torch >= 2.0), else one counting wrapper on each
optimizer class's own step (1.13), and a counting iterator around each DataLoader's."""
import array
import time
import weakref
from typing import Any, Iterable, Iterator

class _Steps:
    """The program's step (module docstring), its throughput (steps per second, one iteration's
    first optimizer step to the next's) and, for a DDP program, its module, whose parameter digest
    at exit is the rank's digest."""

    def __init__(self) -> None:
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

    def current(self) -> int:
        if self.has_optimizer:
            if self.pending and not self.marks:
                self._begin_next()  # no batch or forward to mark a start: anything after the step is the next
            return self.iterations - 1 if self.pending else self.iterations
        return self.batches - 1 if self.batches else -1

    def _started(self) -> bool:
        now = time.perf_counter()
        if self.starts == 0:
            self.first = now
        else:
            self.durations.append(now - self.last)
        self.last = now
        self.starts += 1

    def _begin_next(self) -> None:
        self.pending = False
        self.stepped = set()

    def optimizer_created(self, optimizer: Any = None) -> None:
        if optimizer is not None:
            self.optimizers.append(weakref.ref(optimizer))
        if not self.has_optimizer:
            self.has_optimizer = True
            self._started()

    def optimizer_step_begins(self) -> None:
        self.depth += 1

    def optimizer_step_ends(self, optimizer: Any) -> None:
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

    def forward(self, module: Any) -> None:
        self.marks = True
        if self.pending:
            self._begin_next()
        if self.ddp is None and self.is_ddp(module):
            self.ddp = module

    is_ddp = staticmethod(lambda module: False)

    def batch(self) -> None:
        self.marks = True
        self.batches += 1
        if self.pending:
            self._begin_next()
        if not self.has_optimizer:
            self._started()

    def count(self) -> int:
        return self.iterations if self.has_optimizer else self.batches

    def optimized_parameters(self) -> list:
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

    def rate(self) -> float:
        return (self.starts - 1) / (self.last - self.first) if self.starts > 1 and self.last > self.first else 0.0

    def median_duration(self) -> float:
        """The median step's seconds (0 before two steps): unlike the mean rate, it does not move
        when another process takes the CPU for a few of the steps."""
        d = sorted(self.durations)
        if not d:
            return 0.0
        mid = len(d) // 2
        return d[mid] if len(d) % 2 else (d[mid - 1] + d[mid]) / 2


def _parameter_digest(parameters: Iterable) -> int:
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


def _install_steps(torch: Any, DistributedDataParallel: Any, steps: "_Steps", runtime: Any) -> None:
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


def _count_class_steps(cls: type, steps: "_Steps") -> None:
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

    def __init__(self, it: Iterator, steps: "_Steps") -> None:
        self._it, self._steps = it, steps

    def __iter__(self) -> "_CountedIterator":
        return self

    def __next__(self) -> Any:
        item = next(self._it)
        self._steps.batch()
        return item

    def __len__(self) -> int:
        return len(self._it)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._it, name)
