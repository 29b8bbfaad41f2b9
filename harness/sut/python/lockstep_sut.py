"""lockstep's system-under-test helper: read a scenario's inputs, write a system's outputs.

An adapter is a short script that lockstep starts once per rank in place of its own rank
process. It reads the inputs lockstep wrote (``.npy`` arrays plus ``manifest.json``), does the
scenario's work with the system under test, and writes its outputs, which lockstep then
checks with the same checks it applies to its own reference. The contract (array names,
shapes, dtypes, per capability) is documented in scenarios/README.md, section "Systems under
test"; this module needs nothing beyond numpy and the standard library.

    import lockstep_sut
    inp, out = lockstep_sut.start()          # reads RANK, WORLD_SIZE, LOCKSTEP_SUT_* from the env
    for group in inp.config["groups"]:
        ids = inp.share("ids." + group)
        out.attempt(group, lambda: my_lookup(ids))   # an exception is recorded as a rejection
    out.finish()                              # last: marks this rank's outputs complete
"""
import json
import os
import re
import time
import traceback

import numpy as np

SCHEMA_VERSION = 1
_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


class ContractError(RuntimeError):
    """The adapter used the helper against the contract (unknown array, bad name, ...)."""


def _write_atomically(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


class Inputs:
    """The scenario's inputs: ``capability``, ``config`` (a dict), ``rank``, ``world_size`` and
    the arrays named in the manifest, loaded on first use (memory-mapped, read-only)."""

    def __init__(self, directory, rank, world_size):
        self.directory = directory
        with open(os.path.join(directory, "manifest.json")) as f:
            self.manifest = json.load(f)
        if self.manifest.get("schema_version") != SCHEMA_VERSION:
            raise ContractError("inputs schema_version %r, this helper reads %d"
                                % (self.manifest.get("schema_version"), SCHEMA_VERSION))
        self.capability = self.manifest["capability"]
        self.config = self.manifest["config"]
        self.rank = rank
        self.world_size = world_size
        if world_size != self.manifest["world_size"]:
            raise ContractError("WORLD_SIZE is %d, the inputs were written for %d"
                                % (world_size, self.manifest["world_size"]))
        self._cache = {}

    def names(self):
        """The names of every input array."""
        return sorted(self.manifest["arrays"])

    def array(self, name):
        """The whole input array ``name`` (every rank's part), memory-mapped read-only: copy it
        (np.array) before handing it to code that writes, such as torch.from_numpy."""
        if name not in self.manifest["arrays"]:
            raise ContractError("no input array %r; inputs are: %s" % (name, ", ".join(self.names())))
        if name not in self._cache:
            entry = self.manifest["arrays"][name]
            self._cache[name] = np.load(os.path.join(self.directory, entry["file"]), mmap_mode="r")
        return self._cache[name]

    def share(self, name, index=None):
        """A writable copy of this rank's contiguous part of input ``name``. Arrays split over the ranks have an
        offsets array ``shares.<name>``: [world_size + 1] for one split, or [k, world_size + 1]
        for k splits (one per batch or step; pick it with ``index``, rows of ``name`` being
        absolute positions). An array without shares belongs whole to every rank."""
        key = "shares." + name
        data = self.array(name)
        if key not in self.manifest["arrays"]:
            return np.array(data)
        offsets = np.asarray(self.array(key))
        if offsets.ndim == 2:
            if index is None:
                raise ContractError("%r is split once per batch or step: pass index" % name)
            offsets = offsets[index]
        return np.array(data[offsets[self.rank]:offsets[self.rank + 1]])

    def batches(self):
        """sampling: [(batch, seeds)] for this rank, every batch (seeds may be empty)."""
        count = int(self.config["num_batches"])
        if count == 0:  # num_seeds = 0: no batch, and no shares.seeds
            return []
        offsets = np.asarray(self.array("shares.seeds"))
        seeds = self.array("seeds")
        return [(b, np.array(seeds[offsets[b, self.rank]:offsets[b, self.rank + 1]]))
                for b in range(count)]

    def steps(self):
        """embedding: [(step, ids, grads)] for this rank, every step (ids may be empty); with
        bags grads are the bags' (bag_steps() gives their offsets and weights too)."""
        count = int(self.config["steps"])
        offsets = np.asarray(self.array("shares.ids"))
        ids, grads = self.array("ids"), self.array("grads")
        out = []
        gshares = np.asarray(self.array("shares.grads"))  # with bags, grads are per bag
        for t in range(count):
            lo, hi = offsets[t, self.rank], offsets[t, self.rank + 1]
            glo, ghi = gshares[t, self.rank], gshares[t, self.rank + 1]
            out.append((t, np.array(ids[lo:hi]), np.array(grads[glo:ghi])))
        return out

    def bag_steps(self):
        """embedding with bags (config["bags"] not None): [(step, ids, offsets, weights, grads)]
        for this rank, every step: ids of this rank's bags, concatenated; offsets int64
        [bags + 1], bag b holding ids[offsets[b]:offsets[b+1]] (torch.nn.EmbeddingBag's offsets
        with include_last_offset=True; np.diff(offsets) are TorchRec's lengths); weights float32
        per id, or None without per_sample_weights; grads float32 [bags, dim], d loss / d pooled
        row. Any of them may be empty."""
        if self.config.get("bags") is None:
            raise ContractError("bag_steps(): this scenario has no bags (config['bags'] is null); use steps()")
        weighted = self.config["bags"]["per_sample_weights"]
        out = []
        for t, ids, grads in self.steps():
            lengths = self.share("lengths", t)
            offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
            weights = self.share("weights", t) if weighted else None
            out.append((t, ids, offsets, weights, grads))
        return out

    def training_batch(self, step):
        """training: this rank's batch of `step` as a dict: seeds, seed_to_output, labels
        (int64), inputs (float32 [n, feature_dim], one row per src node of the deepest block)
        and blocks, a list over hops (hop 0 = the seeds' block) of dicts with src_nodes,
        dst_nodes, edge_src, edge_dst (int64)."""
        pre = "step%d.rank%d." % (step, self.rank)
        batch = {k: np.array(self.array(pre + k)) for k in ("seeds", "seed_to_output", "labels", "inputs")}
        batch["blocks"] = [{k: np.array(self.array("%shop%d.%s" % (pre, h, k)))
                            for k in ("src_nodes", "dst_nodes", "edge_src", "edge_dst")}
                           for h in range(int(self.config["num_hops"]))]
        return batch


class Outputs:
    """This rank's outputs. ``finish()`` must be the last call: a rank that exits without it
    is reported as a missing participant."""

    def __init__(self, directory, rank):
        self.directory = directory
        self.rank = rank
        os.makedirs(directory, exist_ok=True)
        self._arrays = {}
        self._rejected = {}
        self._notes = []
        self._metrics = {}
        self._system = {}
        self._progress = 0
        self._t0 = time.monotonic()

    def save(self, name, value):
        """Writes output array ``name`` (anything numpy.asarray takes: numpy, a torch tensor on
        the host, a list)."""
        if not _NAME.match(name):
            raise ContractError("output name %r must match [A-Za-z0-9_.-]+" % name)
        if hasattr(value, "detach"):  # a torch tensor: no autograd, on the host
            value = value.detach().cpu()
        array = np.ascontiguousarray(np.asarray(value))
        np.save(os.path.join(self.directory, name + ".npy"), array, allow_pickle=False)
        self._arrays[name] = {"file": name + ".npy", "dtype": array.dtype.str, "shape": list(array.shape)}

    def attempt(self, name, fn):
        """Calls ``fn()``; saves its result as ``name``, or, if it raises, records the rejection
        (type and message) instead. Returns the result, or None when rejected."""
        try:
            value = fn()
        except Exception as e:  # the system's own error is the observation
            self._rejected[name] = "%s: %s" % (type(e).__name__, str(e).strip().splitlines()[0] if str(e).strip() else "")
            return None
        self.save(name, value)
        return value

    def attempt_each(self, names, fn, *args):
        """Per-id judgement for a system that rejects a call by raising: calls ``fn(*args)`` on
        the whole share, and when that raises, calls it again once per id (each arg sliced to
        row i), so that one rejected id does not hide the answers beside it. ``names`` is an
        output name or a list of them, one per array ``fn`` returns (a tuple when several). Saves
        the answers (zeros where an id was rejected) and, when some id was rejected,
        ``<names[0]>.answered`` (int8, 1 = answered, 0 = rejected). When every id is rejected the
        call is recorded as a rejection, as ``attempt`` does. Returns the answers, or None."""
        names = [names] if isinstance(names, str) else list(names)

        def call(*a):
            value = fn(*a)
            value = tuple(value) if isinstance(value, (tuple, list)) and len(names) > 1 else (value,)
            if len(value) != len(names):
                raise ContractError("fn returned %d arrays for outputs %s" % (len(value), names))
            return [np.asarray(v.detach().cpu() if hasattr(v, "detach") else v) for v in value]

        try:
            whole = call(*args)
        except Exception as e:  # the system's own error: now judge each id on its own
            count = len(args[0])
            rows, first = [None] * count, None
            for i in range(count):
                try:
                    rows[i] = call(*[a[i:i + 1] for a in args])
                except Exception as each:
                    first = first or each
            answered = np.array([r is not None for r in rows], dtype=np.int8)
            if not answered.any():
                message = str(first or e).strip()
                for name in names:
                    self._rejected[name] = "%s: %s" % (type(first or e).__name__, message.splitlines()[0] if message else "")
                return None
            sample = next(r for r in rows if r is not None)
            whole = []
            for k, name in enumerate(names):
                array = np.zeros((count,) + sample[k].shape[1:], dtype=sample[k].dtype)
                for i, r in enumerate(rows):
                    if r is not None:
                        array[i] = r[k][0]
                whole.append(array)
            self.save(names[0] + ".answered", answered)
        for name, array in zip(names, whole):
            self.save(name, array)
        return whole[0] if len(names) == 1 else tuple(whole)

    def note(self, text):
        """A remark shown in the report (e.g. a semantic the adapter had to choose)."""
        self._notes.append(str(text))

    def metric(self, name, value):
        """A number for the report and baselines; names ending in _per_s are higher-is-better,
        in _s lower-is-better (see reports/README.md)."""
        self._metrics[name] = float(value)

    def system(self, **versions):
        """The system's identity, e.g. system(dgl=dgl.__version__, torch=torch.__version__)."""
        self._system.update({k: str(v) for k, v in versions.items()})

    def progress(self, what):
        """Tells lockstep's watchdog this rank is alive and what it is doing; the timeout clock
        restarts, and a timeout diagnosis quotes ``what``."""
        self._progress += 1
        _write_atomically(os.path.join(self.directory, "progress.json"),
                          json.dumps({"count": self._progress, "what": str(what)}))

    def finish(self):
        """Writes done.json: the outputs are complete."""
        done = {
            "schema_version": SCHEMA_VERSION,
            "rank": self.rank,
            "arrays": self._arrays,
            "rejected": self._rejected,
            "notes": self._notes,
            "metrics": self._metrics,
            "system": self._system,
            "wall_s": time.monotonic() - self._t0,
        }
        _write_atomically(os.path.join(self.directory, "done.json"), json.dumps(done, indent=1))


def start():
    """Returns (Inputs, Outputs) for this rank, from the environment lockstep's launcher sets:
    RANK, WORLD_SIZE, LOCKSTEP_SUT_INPUTS and LOCKSTEP_SUT_OUTPUTS."""
    try:
        rank = int(os.environ["RANK"])
        world_size = int(os.environ["WORLD_SIZE"])
        inputs = os.environ["LOCKSTEP_SUT_INPUTS"]
        outputs = os.environ["LOCKSTEP_SUT_OUTPUTS"]
    except KeyError as e:
        raise ContractError("%s is not set: adapters are started by `lockstep run`" % e.args[0])
    out = Outputs(outputs, rank)
    out.progress("started")  # the watchdog's start-up phase ends here (scenarios/README.md)
    return Inputs(inputs, rank, world_size), out


def edge_rows(batch, hop, dst, src, eid):
    """sampling: the rows of an ``edges.repeat<k>`` output, int64 [n, 5] =
    (batch, hop, dst, src, edge id) for n sampled edges."""
    dst = np.asarray(dst, dtype=np.int64).reshape(-1)
    n = dst.shape[0]
    return np.column_stack([np.full(n, batch, np.int64), np.full(n, hop, np.int64), dst,
                            np.asarray(src, dtype=np.int64).reshape(-1),
                            np.asarray(eid, dtype=np.int64).reshape(-1)]).reshape(n, 5)


def main_guard(fn):
    """Runs fn(); on an exception prints the traceback and exits 1 (the watchdog reports it as
    a rank failure quoting the last line)."""
    try:
        fn()
    except SystemExit:
        raise
    except BaseException:
        traceback.print_exc()
        raise SystemExit(1)
