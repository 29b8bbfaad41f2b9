"""Where the program is: the innermost frame of its own code (a call's site, "train.py:57"), and how
its uncaught exception is described (the exception's line, the frame that raised it, the step). The
program's failure, once described, is kept here for the exit path."""
import os
import sys
import threading
import traceback
from typing import Dict, List

_failure: List[str] = [""]          # the program's uncaught exception, as the diagnosis quotes it
_failure_step: List[int] = [-1]     # the program's step when it was raised


def _is_program_file(name: str) -> bool:
    if not name or name.startswith("<"):
        return False
    for lib in ("/torch/", "/site-packages/", "/dist-packages/", "/lib/python3", os.sep + "lockstep_torch" + os.sep):
        if lib in name:
            return False
    return True


# A code file's name -> its base name when it is the program's own, else "" (every collective
# walks the stack: each file is judged once).
_program_files: Dict[str, str] = {}


def _site_in(frame) -> str:
    files = _program_files
    while frame is not None:
        name = frame.f_code.co_filename
        base = files.get(name)
        if base is None:
            base = files[name] = os.path.basename(name) if _is_program_file(name) else ""
        if base:
            return "%s:%d" % (base, frame.f_lineno)
        frame = frame.f_back
    return ""


def program_site() -> str:
    """"train.py:57": the innermost frame of the program's own code on this thread; on a thread that
    runs no program code (DDP's autograd thread), the main thread's (where backward() was called)."""
    site = _site_in(sys._getframe(1))
    if site or threading.current_thread() is threading.main_thread():
        return site
    return _site_in(sys._current_frames().get(threading.main_thread().ident))


def _describe_failure(kind, value, tb, steps) -> str:
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
