"""lockstep_fast (harness/pytorch/fast/fast_calls.cpp): the program's most frequent collectives begun
and started with no Python between them, built against the torch the program imports (its headers,
C++20, its C++ ABI) and kept in lockstep's cache, one build per (torch, interpreter, source).

The rank runtime loads a build when one is there (load); where none is, it verifies through the
Python group alone, exactly as before, and starts one build in the background for the next runs
(build_in_background), so that no run waits for a compiler. `ci/setup` and `ci/systems` build it
for the interpreters they make:

  python -m lockstep_torch.fast        # builds (about 20 s), prints the path; exit 1 on failure

LOCKSTEP_FAST=0 turns it off (the Python path only). torch < 2.11 is never built for: its headers
differ and its Python Work needs the future path (torch_private.python_work_kept_alive)."""
import fcntl
import hashlib
import importlib.machinery
import importlib.util
import os
import subprocess
import sys
import sysconfig
import time
import warnings
from typing import Any, List, Optional

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(_HERE))))  # the source tree
SOURCE = os.path.join(_ROOT, "harness", "pytorch", "fast", "fast_calls.cpp")
HEADER = os.path.join(_ROOT, "harness", "pytorch", "program.h")
NAME = "lockstep_fast"
ABI = 2  # fast_calls.cpp's ABI attribute: the module this file speaks


def supported(torch: Any) -> bool:
    try:
        major, minor = (int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (2, 11)


def _cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "lockstep", "fast")


def _command(torch: Any, target: str) -> List[str]:
    from torch.utils import cpp_extension

    lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    cmd = [os.environ.get("CXX", "g++"), "-O2", "-shared", "-fPIC", "-std=c++20", "-fvisibility=hidden",
           "-DTORCH_EXTENSION_NAME=" + NAME, "-D_GLIBCXX_USE_CXX11_ABI=%d" % int(torch._C._GLIBCXX_USE_CXX11_ABI),
           "-I" + _ROOT, "-I" + sysconfig.get_paths()["include"]]
    cmd += ["-I" + p for p in cpp_extension.include_paths()]
    abi_flags = getattr(cpp_extension, "_get_pybind11_abi_build_flags", None)  # torch's pybind11 ABI ([] from 2.10 on)
    if abi_flags is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cmd += list(abi_flags())
    cmd += [SOURCE, "-o", target, "-L" + lib, "-Wl,-rpath," + lib, "-ltorch", "-ltorch_cpu", "-lc10", "-ltorch_python"]
    return cmd


def _target(torch: Any) -> str:
    """Where the build for this torch, interpreter and source lives."""
    h = hashlib.sha256()
    for path in (SOURCE, HEADER):
        with open(path, "rb") as f:
            h.update(f.read())
    h.update(("%d|%s|%s|%s|%s" % (ABI, torch.__version__, getattr(torch.version, "git_version", ""), os.path.realpath(torch.__file__),
                                  sys.version)).encode())
    # The compiler, its flags and torch's paths; not this checkout's folder (the sources count by
    # their content above), so that every clone of one source shares the build.
    h.update("\0".join(_command(torch, "-")).replace(_ROOT, "<source>").encode())
    h.update(_compiler_version().encode())
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    return os.path.join(_cache_dir(), h.hexdigest()[:20], NAME + suffix)


def _compiler_version() -> str:
    try:
        return subprocess.run([os.environ.get("CXX", "g++"), "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "?"


BUILD_TIMEOUT_S = 600  # a compiler that hangs fails the build; a waiter gives up after as long again


def build(torch: Any) -> str:
    """Builds the module for `torch` (once: a second caller waits for the first, and does not build
    again when the first failed meanwhile); its path. Raises with the compiler's last lines when it
    fails."""
    target = _target(torch)
    if os.path.exists(target):
        return target
    os.makedirs(os.path.dirname(target), exist_ok=True)
    began = time.time()
    with open(target + ".lock", "w") as lock:
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.time() - began > 2 * BUILD_TIMEOUT_S:
                    raise RuntimeError("lockstep: waited %d s for another build of %s" % (2 * BUILD_TIMEOUT_S, target))
                time.sleep(0.5)
        if os.path.exists(target):
            return target
        if os.path.exists(target + ".failed") and os.path.getmtime(target + ".failed") >= began:
            raise RuntimeError("lockstep: the build of %s that ran meanwhile failed (%s.failed)" % (NAME, target))
        tmp = "%s.%d.tmp" % (target, os.getpid())
        try:
            p = subprocess.run(_command(torch, tmp), capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            p = subprocess.CompletedProcess([], 1, "", "the compiler ran past %d s" % BUILD_TIMEOUT_S)
        if p.returncode != 0:
            with open(target + ".failed", "w") as f:
                f.write(p.stderr[-20000:])
            raise RuntimeError("lockstep: building %s failed (%s.failed):\n%s" % (NAME, target, p.stderr[-2000:]))
        os.replace(tmp, target)
    return target


def build_in_background(torch: Any) -> None:
    """Starts one build for later runs, detached, unless one ran (or failed) already."""
    target = _target(torch)
    if os.path.exists(target + ".failed"):
        return
    try:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target + ".lock", "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released at once: no build is running
            except OSError:
                return
        with open(os.devnull, "wb") as null:
            subprocess.Popen([sys.executable, "-m", "lockstep_torch.fast"], stdin=null, stdout=null, stderr=null,
                             cwd=os.path.dirname(_HERE), start_new_session=True,
                             env=dict(os.environ, LOCKSTEP_C10D="0", PYTHONPATH=os.path.dirname(_HERE)))
    except OSError:
        pass


def load(torch: Any) -> Optional[Any]:
    """The built module for `torch`, or None (LOCKSTEP_FAST=0, a torch it is not built for, no build
    yet: one is started in the background)."""
    if os.environ.get("LOCKSTEP_FAST", "1") == "0" or not supported(torch) or not os.path.exists(SOURCE):
        return None
    target = _target(torch)
    if not os.path.exists(target):
        build_in_background(torch)
        return None
    try:
        spec = importlib.util.spec_from_file_location(NAME, target)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except (ImportError, OSError) as e:  # a build that does not load here: the Python path verifies
        sys.stderr.write("lockstep: %s does not load (%s); the Python path verifies this run\n" % (target, e))
        return None
    if getattr(module, "ABI", None) != ABI:
        raise RuntimeError("lockstep: %s speaks ABI %r, this package %r" % (target, getattr(module, "ABI", None), ABI))
    return module


if __name__ == "__main__":
    import torch as _torch

    if not supported(_torch):
        print("lockstep: %s is not built for torch %s (the Python path verifies it)" % (NAME, _torch.__version__))
        sys.exit(0)
    try:
        print(build(_torch))
    except RuntimeError as e:
        print(e, file=sys.stderr)
        sys.exit(1)
