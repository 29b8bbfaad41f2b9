"""What the program ran on, as lockstep records it (results.json's `system`, the baseline store's
environment check): "torch 2.15.0+cu132, cuda 13.2, nccl 2.30.7, python 3.11.7, numpy 2.4.6,
torch_geometric 2.8.1". Read from the program's own interpreter when it creates its default
process group: its torch and the CUDA and NCCL that torch was built with ("none" for a CPU build or
a torch without NCCL), Python, and the GNN and embedding packages the program has imported by then
(none is imported here)."""
import platform
import sys
from typing import Any, List, Tuple

# Packages named when the program imported them, in this order.
PACKAGES = ("numpy", "torch_geometric", "pyg_lib", "torch_sparse", "torch_scatter", "torchrec", "fbgemm_gpu", "dgl")


def _nccl(torch: Any) -> str:
    try:
        v = torch.cuda.nccl.version()  # the NCCL torch loads; needs no GPU
    except Exception:  # noqa: BLE001: a CPU build, or a torch without NCCL
        return "none"
    return ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)


def components(torch: Any) -> List[Tuple[str, str]]:
    """[(name, version)] of what the program runs on, torch first."""
    out = [("torch", str(torch.__version__)), ("cuda", str(getattr(torch.version, "cuda", None) or "none")),
           ("nccl", _nccl(torch)), ("python", platform.python_version())]
    for name in PACKAGES:
        module = sys.modules.get(name)
        if module is not None:
            out.append((name, str(getattr(module, "__version__", "unknown"))))
    return out


def identity(torch: Any) -> str:
    """The components as lockstep records them: "name version" joined by ", "."""
    return ", ".join("%s %s" % c for c in components(torch))
