"""The binding to liblockstep_program.so (harness/pytorch/program.h): the call structure, the two
callbacks through which lockstep runs the program's calls, and the library's load, which refuses a
library of another C interface version than this package speaks."""
import ctypes
import os
from typing import Dict, Iterable, Tuple

_ABI_VERSION = b"9"      # the C interface this file speaks (program.h's ls_version)
# The call fields this package sets (groups.py, runtime.py): the library's table must have them.
_FIELDS_SET = ("root", "peer", "tag")


class _Call(ctypes.Structure):
    _fields_ = [
        ("op", ctypes.c_int32), ("dtype", ctypes.c_int32), ("reduce", ctypes.c_int32), ("device", ctypes.c_int32),
        ("inp", ctypes.c_void_p), ("in_count", ctypes.c_int64),
        ("out", ctypes.c_void_p), ("out_count", ctypes.c_int64),
        ("nsplits", ctypes.c_int64),
        ("send_counts", ctypes.POINTER(ctypes.c_int64)), ("recv_counts", ctypes.POINTER(ctypes.c_int64)),
        ("nfields", ctypes.c_int64), ("fields", ctypes.POINTER(ctypes.c_int64)),
    ]


def call_fields(lib: ctypes.CDLL) -> Dict[str, Tuple[int, int]]:
    """The library's call-field table (ls_call_fields): name -> (index in ls_call's fields, value
    where the op does not carry it). Refuses a table without a field this package sets."""
    lib.ls_call_fields.restype = ctypes.c_char_p
    lib.ls_call_fields.argtypes = []
    text = lib.ls_call_fields().decode()
    table = {}
    for i, row in enumerate(text.split(",") if text else []):
        name, _, none = row.partition("=")
        table[name] = (i, int(none))
    missing = [n for n in _FIELDS_SET if n not in table]
    if missing:
        raise RuntimeError("lockstep: liblockstep_program.so's call fields %r lack %s, which this lockstep_torch package "
                           "sets: the library and the Python side come from different builds" % (text, ", ".join(missing)))
    return table


_START = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int, ctypes.c_int64, ctypes.POINTER(_Call), ctypes.c_void_p, ctypes.c_int)
_WAIT = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int)


def _error_text(e: BaseException) -> bytes:
    """The engine's error, for the C side: its text (or its type when it has none)."""
    return (str(e) or type(e).__name__).encode(errors="replace")


def _error_into(err, errlen, e):
    text = _error_text(e)[: errlen - 1] + b"\0"
    ctypes.memmove(err, text, len(text))


def _load_library() -> ctypes.CDLL:
    path = os.environ.get("LOCKSTEP_PROGRAM_LIB", "")
    lib = ctypes.CDLL(path)
    lib.ls_version.restype = ctypes.c_char_p
    lib.ls_version.argtypes = []
    version = lib.ls_version()
    if version != _ABI_VERSION:
        raise RuntimeError("lockstep: %s speaks C interface version %r, this lockstep_torch package version %r: the "
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
    lib.ls_begin.argtypes = [ctypes.c_int, ctypes.POINTER(_Call), ctypes.c_char_p, ctypes.c_int64]
    lib.ls_end.restype = ctypes.c_int
    lib.ls_end.argtypes = [ctypes.c_int64, ctypes.c_char_p]
    lib.ls_check_same_count.restype = None
    lib.ls_check_same_count.argtypes = [ctypes.c_int64, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int64]
    lib.ls_metric.restype = None
    lib.ls_metric.argtypes = [ctypes.c_char_p, ctypes.c_double]
    lib.ls_unverified.restype = None
    lib.ls_unverified.argtypes = [ctypes.c_char_p, ctypes.c_int64]
    lib.ls_engine_timeout.restype = None
    lib.ls_engine_timeout.argtypes = [ctypes.c_double]
    lib.ls_finish.restype = ctypes.c_int
    lib.ls_finish.argtypes = [ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_double, ctypes.c_double, ctypes.c_int64,
                              ctypes.c_int64]
    return lib


def _codes(lib: ctypes.CDLL, kind: str, names: Iterable[str]) -> Dict[str, int]:
    out = {}
    for n in names:
        v = lib.ls_code(kind.encode(), n.encode())
        if v < 0:
            raise RuntimeError("lockstep: liblockstep_program.so does not know %s %r" % (kind, n))
        out[n] = v
    return out
