"""Loaded by Python at start-up from PYTHONPATH: under lockstep's launcher (LOCKSTEP_C10D=1),
installs lockstep's wrapper of the program's process group before the program runs (the lockstep_torch package). The interpreter's
own sitecustomize, which this file shadows, is run first."""
import os
import sys


def _run_shadowed():
    here = os.path.dirname(os.path.abspath(__file__))
    for d in sys.path:
        path = os.path.join(d or ".", "sitecustomize.py")
        if os.path.abspath(d or ".") != here and os.path.isfile(path):
            with open(path) as f:
                exec(compile(f.read(), path, "exec"), {"__name__": "sitecustomize", "__file__": path})
            return


_run_shadowed()
if os.environ.get("LOCKSTEP_C10D") == "1":
    # A wrapper that cannot install must not let the program run unchecked: the rank fails, and
    # its last line (the diagnosis's message) says why.
    try:
        import lockstep_torch

        lockstep_torch.install()
    except Exception as e:  # noqa: BLE001
        sys.stderr.write("lockstep: its program wrapper failed to install: %s: %s\n" % (type(e).__name__, e))
        sys.stderr.flush()
        os._exit(1)
