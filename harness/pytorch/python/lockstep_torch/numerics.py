"""The program's final parameters, tensor by tensor, for comparisons across environments (a torch
upgrade): the file numerics-rank<r>.bin beside the rank's status. lockstep compares two records'
tensors element by element (largest absolute and relative difference, elements beyond the
tolerance); the digest only says whether they are identical.

The file (read by harness/baseline/numerics.cpp, which treats it as untrusted input): one line of
JSON {"format": "lockstep-numerics", "version": 1, "tensors": [{"name", "shape", "dtype", "kept"}]},
then the kept tensors' elements in order, each as a little-endian float64 (exact for f64, f32, bf16
and f16). A tensor past LOCKSTEP_NUMERICS_MAX_ELEMENTS (default 4194304 elements per rank) is
listed with kept false and no elements, as is one torch cannot copy out (meta, sparse, complex)."""
import array
import ctypes
import json
import os
import sys
from typing import Any, Iterable, List, Tuple

DEFAULT_MAX_ELEMENTS = 1 << 22


def parameter_names(torch: Any) -> dict:
    """id(parameter) -> its name in the module that holds it, from the modules alive at exit that are
    no other module's child (the program's models), in the order the collector lists them; the
    first name wins. Read at exit, not in a forward hook: torch.compile traces those."""
    import gc

    modules = [o for o in gc.get_objects() if isinstance(o, torch.nn.Module)]
    children = set()
    for m in modules:
        children.update(id(c) for c in getattr(m, "_modules", {}).values() if c is not None)
    names: dict = {}
    for m in modules:
        if id(m) in children:
            continue
        try:
            for n, p in m.named_parameters():
                names.setdefault(id(p), n)
        except Exception:  # noqa: BLE001: a module whose parameters cannot be listed names none
            pass
    return names


def _path() -> str:
    """numerics-rank<r>.bin beside the rank's status ("" when the rank writes no status)."""
    try:
        with open(os.environ.get("LOCKSTEP_PLAN", "")) as f:  # the rank's plan (harness/rank/plan.h)
            plan = json.load(f)
        status, rank = plan.get("status", ""), int(plan.get("rank", -1))
    except (OSError, ValueError, AttributeError, TypeError):
        return ""
    if not status or rank < 0:
        return ""
    return os.path.join(os.path.dirname(status), "numerics-rank%d.bin" % rank)


def _max_elements() -> int:
    text = os.environ.get("LOCKSTEP_NUMERICS_MAX_ELEMENTS", "")
    try:
        return max(0, int(text)) if text else DEFAULT_MAX_ELEMENTS
    except ValueError:
        return DEFAULT_MAX_ELEMENTS


def _local(p: Any) -> Any:
    """The tensor as this rank holds it: a DTensor's local shard."""
    t = p.detach()
    return t.to_local() if hasattr(t, "to_local") else t


def _float64_bytes(t: Any, torch: Any) -> bytes:
    """The tensor's elements as little-endian float64; raises when torch cannot copy them out (a
    meta, sparse or complex tensor)."""
    if t.is_complex() or t.layout != torch.strided or t.device.type == "meta":
        raise ValueError("not a dense real tensor")
    t = t.to(device="cpu", dtype=torch.float64).contiguous()
    data = ctypes.string_at(t.data_ptr(), t.numel() * 8) if t.numel() else b""
    if sys.byteorder != "little":
        a = array.array("d", data)
        a.byteswap()
        data = a.tobytes()
    return data


def write(named: Iterable[Tuple[str, Any]]) -> None:
    """Writes this rank's tensors (name, tensor) to numerics-rank<r>.bin. A tensor that cannot be
    copied out, or past the element budget, is listed with kept false. Nothing when the rank has no
    status path or no tensors."""
    path = _path()
    named = list(named)
    if not path or not named:
        return
    import torch

    budget = _max_elements()
    header: List[dict] = []
    blobs = []
    for name, p in named:
        try:
            t = _local(p)
        except Exception:  # noqa: BLE001: a tensor subclass without a local view
            t = p
        entry = {"name": name, "shape": [int(d) for d in getattr(t, "shape", ())], "dtype": str(getattr(t, "dtype", "")).replace("torch.", ""),
                 "kept": False}
        numel = 1
        for d in entry["shape"]:
            numel *= d
        if numel <= budget:
            try:
                blob = _float64_bytes(t, torch)
                if len(blob) == numel * 8:
                    blobs.append(blob)
                    entry["kept"] = True
                    budget -= numel
            except Exception:  # noqa: BLE001: listed without values; the digest still covers it
                pass
        header.append(entry)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(json.dumps({"format": "lockstep-numerics", "version": 1, "tensors": header}).encode() + b"\n")
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def write_quietly(named: Iterable[Tuple[str, Any]]) -> None:
    """write(), saying on stderr (not failing the rank) when it cannot."""
    try:
        write(named)
    except Exception as e:  # the comparison then says the tensors were not recorded
        sys.stderr.write("lockstep: could not write the parameters for comparisons: %s: %s\n" % (type(e).__name__, e))
        sys.stderr.flush()
