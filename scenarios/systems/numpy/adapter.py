"""A tiny system under test written with numpy alone: lockstep's example adapter.

It does every capability the way the contract asks (partition lookups that reject invalid
ids, uniform neighbor sampling with a seeded generator, an embedding table with SGD/Adagrad/
Adam applied in the reference's operation order), and `--bug NAME` makes it misbehave the way
real systems do, so the scenarios beside it prove that lockstep catches each one:

  wrong        rank 1 returns one wrong answer           -> result_mismatch
  crash        rank 1 raises                              -> rank_failure
  crash_all    every rank raises the same error, once all have got there, rank 0 50 ms
               after the others                           -> rank_failure blaming rank 0
  reject_minus_one  embedding: rejects a pull or step only when it holds the id -1; other ids
               outside the table read and update row 0 (TorchRec at world size 1)
                                                          -> result_mismatch naming -2 and row 0
  table_drift  embedding: every update also moves each element 2 units of the tolerance scale
               (2^-23 * max(|v|, 2^-6)), rows pulled or pooled exactly from its own table
                                                          -> pass with tolerance_ulps = 3
  crash_all_numbers  as crash_all, each rank's message with its own numbers (an index and
               shapes, as Gloo's all_gather words unequal batches) -> rank_failure blaming rank 0
  hang         rank 1 never finishes                      -> timeout
  nothing      rank 1 exits 0 without writing outputs     -> missing_participant
  accept       lookups accept invalid ids                 -> invariant_violation
  not_owned_last_row  a partition's store maps a global id it does not hold to row -1, its last
               row, and raises IndexError for ids past its largest (PyG's LocalFeatureStore);
               judged per id (out.attempt_each)            -> invariant_violation naming the id
  mask_ignored lookups leave out their validity mask, so the placeholder answers of rejected
               ids read as answers                         -> invariant_violation
  reject_share a lookup raises for the whole share when one id is bad, so valid ids beside it
               go unanswered                               -> result_mismatch
  unseeded     sampling ignores the seed                  -> nondeterminism
  per_process  sampling mixes the process id into the seed: repeats in one process
               agree, fresh processes do not (as DGL with 2 threads) -> nondeterminism
  biased       sampling draws (8 random bits) % degree    -> distribution_mismatch
  overflow     sampling draws one neighbor too many       -> invariant_violation
  stale        embedding gradients are never cleared      -> result_mismatch (stale gradients)
  mean         duplicate ids' gradients are averaged      -> result_mismatch (mean instead of sum)
  sqrt_state   Adagrad stores sqrt(state) + eps            -> result_mismatch
  floor_split  the split takes chunks of n // world_size ids, one per rank (PyG's multi-GPU
               example): more chunks than ranks when world_size does not divide n, so the last
               ids are on no rank                          -> split_coverage
  row_zero     embedding ids outside the table read and update row 0 (FBGEMM's
               BoundsCheckMode.WARNING) without declaring it -> result_mismatch (row 0 moved)
  rowwise_sum  row-wise Adagrad adds the row's sum of g^2, not its mean -> result_mismatch
  grad_div     embedding gradients divided by the world size (TorchRec's default) without
               declaring it                                -> result_mismatch (gradients divided)
  fma          SGD's w - lr*g rounded once (computed in float64, as fbgemm's fused multiply-add):
               within a declared tolerance_ulps, not bit-identical
  own_steps    each rank counts its own batches, ceil(len(mine) / batch_size): ranks with one
               id more run one step more                   -> uneven_steps
  bag_mean_as_sum  embedding bags told to mean-pool are summed (forward and backward)
                                                           -> result_mismatch (summed instead of averaged)
  empty_bag_nan    mean pooling divides an empty bag's zero sum by its size 0: NaN, where
                   torch.nn.EmbeddingBag gives zeros         -> result_mismatch (empty bag, NaN)
  weights_ignored  per-sample weights are ignored (pooled and spread with weight 1)
                                                           -> result_mismatch (weights ignored)
  skip_bad_batch   (with bad_ids = "ignore") a pull and step holding any id outside the table is
                   skipped whole, its valid ids too          -> result_mismatch (mixed group)
  mean_by_count    a weighted bag's mean is divided by its length, not by the sum of its weights
                                                           -> result_mismatch (averaged over their length)

`--mean-eps E` adds E to a weighted bag's sum of weights before it divides (TorchRec's row-wise
bags add 1e-6): a semantic the scenario declares as [system.profile] mean_weights_eps.
"""
import argparse
import math
import os
import time

import numpy as np

import lockstep_sut


def lookup(inp, out, bug):
    n = int(inp.config["num_nodes"])
    parts = int(inp.config["num_parts"])
    if inp.config.get("book", "range") == "map":  # any node -> partition assignment
        owner_of = np.asarray(inp.array("part_of")).astype(np.int64)
    else:  # a range book: partition p owns [part_offsets[p], part_offsets[p+1])
        offsets = np.asarray(inp.array("part_offsets"))
        owner_of = np.repeat(np.arange(parts, dtype=np.int64), np.diff(offsets))
    # A node's local id (its row in its partition's store): its position among the partition's ids.
    order = np.argsort(owner_of, kind="stable")
    starts = np.searchsorted(owner_of[order], np.arange(parts))
    local_of = np.empty(n, dtype=np.int64)
    local_of[order] = np.arange(n) - starts[owner_of[order]]
    features = np.asarray(inp.array("features")) if "features" in inp.names() else None

    def nid2partid(ids):
        if ids.dtype.kind not in "iu":
            raise TypeError("node ids must be integers, got %s" % ids.dtype)
        if bug != "accept" and ids.size and (ids.min() < 0 or ids.max() >= n):
            raise IndexError("node id outside [0, %d)" % n)
        return owner_of[np.clip(ids, 0, n - 1)].astype(ids.dtype)

    def held(ids, asked):
        """Per id: whether the asked partition holds it (the validity mask)."""
        inside = (ids >= 0) & (ids < n)
        return inside & (owner_of[np.where(inside, ids, 0)] == asked) | (bug == "accept")

    def refuse_share():
        raise ValueError("an id is not held by the partition asked")

    def pyg_store(ids, asked):
        """--bug not_owned_last_row: PyG's LocalFeatureStore, global id -> row through a table of
        max(global id) + 1 entries holding -1 for ids the partition does not hold; row -1 is the
        last row, and an id past the table raises IndexError (which rejects the whole call)."""
        rows = np.empty_like(ids)
        feats = np.zeros((ids.size, 0 if features is None else features.shape[1]), dtype=np.float32)
        for p in np.unique(asked):
            mine = np.flatnonzero(owner_of == p)
            table = np.full(mine.max() + 1, -1, dtype=np.int64)
            table[mine] = np.arange(mine.size)
            index = table[ids[asked == p]]
            rows[asked == p] = np.where(index < 0, mine.size + index, index)
            if features is not None:
                feats[asked == p] = features[mine][index]
        return rows, feats

    for group in inp.config["groups"]:
        ids = inp.share("ids." + group)
        if group.startswith("partid."):
            result = out.attempt(group, lambda: nid2partid(ids))
            if bug == "wrong" and inp.rank == 1 and result is not None and result.size:
                result[-1] += 1
                out.save(group, result)
            continue
        asked = inp.share("parts." + group)
        store = group.startswith("store.")
        names = [group, group + ".features"] if store else group
        if bug == "not_owned_last_row":
            out.attempt_each(names, lambda i, a: pyg_store(i, a) if store else pyg_store(i, a)[0], ids, asked)
            continue
        if bug == "reject_share" and not held(ids, asked).all():
            out.attempt(group, refuse_share)
            continue
        # Answers with a validity mask: 1 where the asked partition holds the id, else 0 (rejected).
        answered = held(ids, asked)
        safe = np.where(answered, np.clip(ids, 0, n - 1), 0)
        out.save(group, np.where(answered, local_of[safe], 0))
        if store:
            out.save(group + ".features", np.where(answered[:, None], features[safe], np.float32(0)))
        if bug != "mask_ignored":  # the bug: the mask is never written, so every placeholder reads as an answer
            out.save(group + ".answered", answered.astype(np.int8))


def sampling(inp, out, bug):
    src = np.asarray(inp.array("edges_src"))
    dst = np.asarray(inp.array("edges_dst"))
    n = int(inp.config["num_nodes"])
    order = np.argsort(dst, kind="stable")             # in-edges of v: order[indptr[v]:indptr[v+1]]
    indptr = np.concatenate([[0], np.cumsum(np.bincount(dst, minlength=n))])
    fanouts = inp.config["fanouts"]
    replace = bool(inp.config["replace"])

    def sample_node(rng, v, fanout):
        eids = order[indptr[v]:indptr[v + 1]]
        d = eids.size
        if bug == "overflow" and d > fanout > 0:
            fanout += 1
        if fanout == -1 or (not replace and d <= fanout):
            return eids
        if d == 0:
            return eids
        if bug == "biased":
            picks, pool = [], list(range(d))
            for _ in range(fanout):
                picks.append(pool.pop(int(rng.integers(0, 256)) % len(pool)))
            return eids[np.array(picks)]
        return eids[rng.choice(d, size=fanout, replace=replace)]

    seed = int(inp.config["sampler_seed"])
    for k in range(int(inp.config["repeats"])):
        rng = np.random.default_rng(None if bug == "unseeded" else [seed, inp.rank] + ([os.getpid()] if bug == "per_process" else []))
        rows = []
        for b, seeds in inp.batches():
            out.progress("sampling batch %d" % b)
            frontier = list(dict.fromkeys(seeds.tolist()))
            for h, fanout in enumerate(fanouts):
                reached = dict.fromkeys(frontier)
                for v in frontier:
                    eids = sample_node(rng, v, fanout)
                    rows.append(lockstep_sut.edge_rows(b, h, np.full(eids.size, v), src[eids], eids))
                    reached.update(dict.fromkeys(src[eids].tolist()))
                frontier = list(reached)
        out.save("edges.repeat%d" % k, np.concatenate(rows) if rows else np.zeros((0, 5), np.int64))
    u = inp.config["uniformity"]
    if u and inp.rank == 0:
        rng = np.random.default_rng([seed, 1 << 20])
        rows = []
        for call in range(int(u["calls"])):
            eids = sample_node(rng, int(u["node"]), int(u["fanout"]))
            rows.append(np.column_stack([np.full(eids.size, call), src[eids], eids]))
        out.save("uniformity", np.concatenate(rows).astype(np.int64))


mean_eps = 0.0  # --mean-eps


def embedding(inp, out, bug):
    f32 = np.float32
    opt = inp.config["optimizer"]
    kind, lr, eps = opt["kind"], f32(opt["lr"]), f32(opt["eps"])
    table = np.array(inp.array("init"), dtype=f32)
    acc = f32(opt["initial_accumulator_value"]) if kind in ("adagrad", "rowwise_adagrad") else f32(0)
    s1 = np.full(table.shape[0], acc, f32) if kind == "rowwise_adagrad" else np.full_like(table, acc)
    s2 = np.zeros_like(table)
    all_ids, all_grads = inp.array("ids"), inp.array("grads")
    offsets = inp.array("step_offsets")
    profile = inp.config["profile"]
    mean = profile["reduce"] == "mean" or bug == "mean"
    divide = profile["gradient_scaling"] == "divide_by_world_size" or bug == "grad_div"
    bad_rule = "row_zero" if bug == "row_zero" else profile["bad_ids"]

    def apply(ids_t, grads_t, t):
        rows, inverse = np.unique(ids_t, return_inverse=True)
        g = np.zeros((rows.size, table.shape[1]), f32)
        np.add.at(g, inverse, grads_t)                  # in batch order, from +0.0
        if mean:
            g = g / np.bincount(inverse).astype(f32)[:, None]
        w = table[rows]
        if kind == "sgd" and bug == "fma":
            w = (w.astype(np.float64) - np.float64(lr) * g.astype(np.float64)).astype(f32)
        elif kind == "sgd":
            w = w - lr * g
        elif kind == "rowwise_adagrad":
            q = np.zeros(rows.size, f32)
            for c in range(g.shape[1]):               # the columns in order, as the reference sums
                q = q + g[:, c] * g[:, c]
            s = s1[rows] + (q if bug == "rowwise_sum" else q / f32(g.shape[1]))
            s1[rows] = s
            w = w - (lr / (np.sqrt(s) + eps))[:, None] * g
        elif kind == "adagrad":
            s = s1[rows] + g * g
            w = w - lr * (g / (np.sqrt(s) + eps))
            s1[rows] = np.sqrt(s) + eps if bug == "sqrt_state" else s
        else:
            step = t + 1
            b1, b2 = f32(1.0 - opt["beta1"]), f32(1.0 - opt["beta2"])
            neg_step = f32(-(opt["lr"] * np.sqrt(1.0 - opt["beta2"] ** step) / (1.0 - opt["beta1"] ** step)))
            m = (g - s1[rows]) * b1 + s1[rows]
            v = (g * g - s2[rows]) * b2 + s2[rows]
            w = w + neg_step * (m / (np.sqrt(v) + eps))
            s1[rows], s2[rows] = m, v
        if bug == "table_drift":  # 2 units of the tolerance scale at every update
            w = w + f32(2) * np.maximum(np.abs(w), f32(2.0 ** -6)) * f32(2.0 ** -23)
        table[rows] = w

    bags = inp.config["bags"]
    if bags is not None:
        pool_mean = bags["pooling"] == "mean" and bug != "bag_mean_as_sum"
        weighted = bags["per_sample_weights"] and bug != "weights_ignored"
        lengths, bag_steps = inp.array("lengths"), inp.array("bag_step_offsets")
        all_weights = inp.array("weights") if bags["per_sample_weights"] else None

    def divisor(weights, lo, hi):
        """A mean bag's divisor: its size, or with weights the weights summed in order (+ eps)."""
        if not weighted or bug == "mean_by_count":
            return f32(hi - lo)
        total = f32(0)
        for p in range(lo, hi):
            total = total + f32(weights[p])
        return total + f32(mean_eps)

    def pool(ids, bag_offsets, weights):
        """Each bag's rows added in order from +0.0 (weights first multiplied in), then / divisor."""
        pooled = np.zeros((len(bag_offsets) - 1, table.shape[1]), f32)
        for b in range(len(bag_offsets) - 1):
            lo, hi = bag_offsets[b], bag_offsets[b + 1]
            for p in range(lo, hi):
                pooled[b] = pooled[b] + (weights[p] * table[ids[p]] if weighted else table[ids[p]])
            if pool_mean and (hi > lo or bug == "empty_bag_nan"):
                with np.errstate(invalid="ignore"):
                    pooled[b] = pooled[b] / divisor(weights, lo, hi)
        return pooled

    def bag_grads(t):
        """Step t's global batch as one gradient row per id: the bag's, times the id's weight,
        or times 1 / size (the reciprocal rounded to float32 first, as torch does)."""
        sizes = np.asarray(lengths[bag_steps[t]:bag_steps[t + 1]])
        g = np.repeat(np.asarray(all_grads[bag_steps[t]:bag_steps[t + 1]]), sizes, axis=0)
        if pool_mean and weighted:  # g * (w / divisor), the factor rounded to float32 first
            w = np.asarray(all_weights[offsets[t]:offsets[t + 1]])
            starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
            k = np.repeat(np.array([divisor(w, starts[b], starts[b + 1]) for b in range(len(sizes))], dtype=f32), sizes)
            g = g * (w / k).astype(f32)[:, None]
        elif pool_mean:
            with np.errstate(divide="ignore"):  # an empty bag's 1 / 0 is repeated 0 times
                g = g * np.repeat(f32(1) / sizes.astype(f32), sizes)[:, None]
        elif weighted:
            g = g * np.asarray(all_weights[offsets[t]:offsets[t + 1]])[:, None]
        return g

    stale_ids, stale_grads = [], []
    for t, ids, _ in inp.steps():
        if bags is None:
            out.save("pulled.step%d" % t, table[ids])
        else:
            _, ids, bag_offsets, weights, _ = inp.bag_steps()[t]
            out.save("pooled.step%d" % t, pool(ids, bag_offsets, weights))
        # Every rank holds the whole table and applies the whole global batch (a replicated toy).
        ids_t = np.asarray(all_ids[offsets[t]:offsets[t + 1]]).astype(np.int64)
        grads_t = np.asarray(all_grads[offsets[t]:offsets[t + 1]]) if bags is None else bag_grads(t)
        if divide:  # each contribution on its own, as a sharded backward divides what it receives
            grads_t = grads_t / f32(inp.world_size)
        if bug == "stale":
            stale_ids.append(ids_t)
            stale_grads.append(grads_t)
            ids_t, grads_t = np.concatenate(stale_ids), np.concatenate(stale_grads)
        apply(ids_t, grads_t, t)
        if inp.rank == 0:
            out.save("table.step%d" % t, table)
            if kind in ("adagrad", "rowwise_adagrad"):
                out.save("state_sum.step%d" % t, s1)
            elif kind == "adam":
                out.save("state_m.step%d" % t, s1)
                out.save("state_v.step%d" % t, s2)
    if inp.rank != 0:
        return
    # Ids outside the table: rank 0 pulls and steps them under the profile's rule.
    n = table.shape[0]
    for gi, group in enumerate(inp.config["bad_id_groups"]):
        ids = np.asarray(inp.array("bad.%s.ids" % group)).astype(np.int64)
        grads = np.asarray(inp.array("bad.%s.grads" % group))
        if divide:
            grads = grads / f32(inp.world_size)

        def pull_and_step():
            bad = (ids < 0) | (ids >= n)
            if bad_rule == "reject" and bad.any() and (bug != "reject_minus_one" or (ids == -1).any()):
                raise IndexError("embedding id outside [0, %d)" % n)
            mapped = np.clip(ids, 0, n - 1) if bad_rule == "clamp" else np.where(bad, 0, ids)
            keep = ~bad if bad_rule == "ignore" else np.ones(ids.size, dtype=bool)
            if bug == "skip_bad_batch" and bad.any():
                keep = np.zeros(ids.size, dtype=bool)
            pulled = np.zeros((ids.size, table.shape[1]), f32)
            pulled[keep] = table[mapped[keep]]
            if keep.any():
                apply(mapped[keep], grads[keep], len(offsets) - 1 + gi)
            return pulled

        out.attempt("bad.%s.pulled" % group, pull_and_step)
        out.save("bad.%s.table" % group, table)


def split(inp, out, bug):
    ids = np.asarray(inp.array("ids"))
    n, ws, batch = ids.size, inp.world_size, int(inp.config["batch_size"])
    if bug == "floor_split":
        chunk = n // ws
        pieces = [ids[i:i + chunk] for i in range(0, n, chunk)] if n else []
        mine = pieces[inp.rank] if inp.rank < len(pieces) else ids[:0]
    else:
        mine = np.array_split(ids, ws)[inp.rank]
    # Every rank runs as many steps as the largest share needs (the short ones pad).
    steps = math.ceil(len(mine) / batch) if bug == "own_steps" else math.ceil(math.ceil(n / ws) / batch)
    out.save("ids", np.ascontiguousarray(mine, dtype=np.int64))
    out.save("steps", np.array([steps], dtype=np.int64))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bug", default="")
    parser.add_argument("--mean-eps", type=float, default=0.0)
    args = parser.parse_args()
    bug = args.bug
    global mean_eps
    mean_eps = args.mean_eps
    inp, out = lockstep_sut.start()
    out.system(numpy=np.__version__)
    if inp.rank == 1 and bug == "crash":
        raise RuntimeError("injected crash in rank 1")
    if bug in ("crash_all", "crash_all_numbers"):
        # A barrier through the ranks' output folders, so that every rank fails within the
        # judge's settle window; the lowest rank is blamed though it fails last.
        open(os.path.join(out.directory, "ready"), "w").close()
        parent = os.path.dirname(out.directory)
        deadline = time.monotonic() + 30
        while not all(os.path.exists(os.path.join(parent, "rank%d" % r, "ready")) for r in range(inp.world_size)):
            if time.monotonic() > deadline:
                raise TimeoutError("the other ranks never got to the barrier")
            time.sleep(0.005)
        if inp.rank == 0:
            time.sleep(0.05)
        if bug == "crash_all_numbers":
            raise RuntimeError("ProcessGroupGloo::allgather: invalid tensor size at index %d (expected (%d, 8), got (%d, 8))"
                               % ((inp.rank + 1) % inp.world_size, 8 - 2 * inp.rank, 6 + inp.rank))
        raise RuntimeError("injected crash in every rank (rank %d)" % inp.rank)
    if inp.rank == 1 and bug == "hang":
        out.progress("hanging on purpose")
        while True:
            time.sleep(60)
    {"lookup": lookup, "sampling": sampling, "embedding": embedding, "split": split}[inp.capability](inp, out, bug)
    if inp.rank == 1 and bug == "nothing":
        os._exit(0)
    out.finish()


if __name__ == "__main__":
    lockstep_sut.main_guard(main)
