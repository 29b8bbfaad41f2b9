"""Every touch of torch's private API, in one place, each with the torch versions it was checked on
(1.13 from Debian, 2.15.0 from PyPI): where torch keeps its groups (torch 1.13's module dictionaries
_pg_*, 2.x's _world object and c10d's registry of groups by name), how the default group is
swapped (_update_default_pg), the default store, Work from a future, and keeping lockstep's group
out of torch.compile's graphs (public: torch.compiler.disable, >= 2.1)."""
import sys
from typing import Any, Callable, List


def default_store(dist: Any) -> Any:
    """The default group's store (private: distributed_c10d._get_default_store, torch 1.13 to 2.15),
    on which lockstep makes its own Gloo groups."""
    return dist.distributed_c10d._get_default_store()


def default_group(c10d: Any) -> Any:
    """The program's default group, as init_process_group made it (private: _get_default_group)."""
    return c10d._get_default_group()


def work_from_future(c10d_c: Any, future: Any) -> Any:
    """A Work that completes with `future` (private: _create_work_from_future, torch 1.13 to 2.15):
    what a wrapped collective returns, completing after lockstep's check."""
    return c10d_c._create_work_from_future(future)


def python_work_kept_alive(torch: Any) -> bool:
    """Whether a Work subclass written in Python that a group's method returns stays alive, with its
    methods, while torch's C++ holds it (DDP's reducer, functional collectives): c10d's
    PyProcessGroup wraps it in a PyWorkHolder that keeps the Python object (checked in the headers of
    torch 2.11.0, 2.14.1 and 2.15.0; torch 1.13's PyProcessGroup keeps only the C++ half, whose wait
    would never return). Where it does not, a wrapped collective returns a Work made from a future
    (work_from_future)."""
    try:
        major, minor = (int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (2, 11)


def _swap_default_group(c10d: Any, real: Any, wrapper: Any) -> None:
    """Makes `wrapper` the default group, registered wherever torch keeps the default group's
    entries."""
    _register_like(c10d, real, wrapper)
    c10d._update_default_pg(wrapper)


def _register_like(c10d: Any, real: Any, wrapper: Any) -> None:
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


def _group_ranks(c10d: Any, pg: Any) -> List[int]:
    """The global ranks of `pg`, in the group's order."""
    get = getattr(c10d, "get_process_group_ranks", None)
    if get is not None:
        return list(get(pg))
    table = c10d._pg_group_ranks[pg]  # torch 1.13: global rank -> group rank
    return sorted(table, key=table.get)


def _group_name(c10d: Any, pg: Any) -> str:
    """The name torch gave `pg`, the same on every member."""
    name = getattr(pg, "group_name", None)
    if name:
        return name
    for d in _holders(c10d):
        v = d.get(pg) if isinstance(d, dict) else None
        if isinstance(v, str):
            return v
    raise RuntimeError("lockstep: torch keeps no name for a process group")


def _holders(c10d: Any) -> list:
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


def _forget_group(c10d: Any, pg: Any) -> None:
    for d in _holders(c10d):
        if isinstance(d, dict):
            d.pop(pg, None)


def _keep_out_of_compile(torch: Any, group_class: type) -> None:
    """torch.compile (torch >= 2.1) must not trace lockstep's group: its methods run eagerly, as
    the program's own group's do (torch.compiler.disable, a public API). Applied once torch._dynamo
    is imported: at once when it is, else when the program first imports it (torch.compile does),
    so that a program that never compiles pays neither dynamo's import (0.7 s a rank under torch
    2.15.0) nor the disabled wrapper's frame switches on every collective."""
    disable = getattr(getattr(torch, "compiler", None), "disable", None)
    if disable is None:
        return

    def apply() -> None:
        # Its own helpers run only inside methods already disabled: wrapping them again would cost
        # each collective another wrapper's frame switches.
        internal = getattr(group_class, "_lockstep_helpers", frozenset())
        for name, member in list(vars(group_class).items()):
            if callable(member) and not name.startswith("__") and name not in internal:
                setattr(group_class, name, disable(member))

    if "torch._dynamo" in sys.modules:
        apply()
    else:
        sys.meta_path.insert(0, _AfterImport("torch._dynamo", apply))


class _AfterImport:
    """A finder on sys.meta_path that runs `then` once the module `name` has been imported, before
    its importer goes on (Python has no post-import hook): it finds the module's spec through the
    other finders, and when the spec's loader has executed the module runs `then` and leaves
    sys.meta_path (a spec only looked at, or a module whose execution failed, leaves it in place
    for the next import). The loader is left as it was."""

    def __init__(self, name: str, then: Callable[[], None]) -> None:
        self.name, self.then = name, then

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        spec = None
        for finder in [f for f in sys.meta_path if f is not self]:
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find is not None else None
            if spec is not None:
                break
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module") or not hasattr(loader, "__dict__"):
            return spec  # a loader that cannot take an attribute: `then` is not run (never seen)
        own = vars(loader).get("exec_module")  # an instance attribute of its own, put back after
        exec_module = loader.exec_module

        def exec_then(module: Any) -> None:
            try:
                exec_module(module)
            finally:
                if own is None:
                    del loader.exec_module
                else:
                    loader.exec_module = own
            if self in sys.meta_path:
                sys.meta_path.remove(self)
                try:
                    self.then()
                except Exception as e:  # noqa: BLE001: the program's import goes on; compile may trace lockstep
                    sys.stderr.write("lockstep: could not keep its group out of torch.compile: %r\n" % (e,))

        loader.exec_module = exec_then
        return spec
