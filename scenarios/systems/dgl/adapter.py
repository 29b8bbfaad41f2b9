"""DGL as a system under test: its partition book, neighbor sampler and DistEmbedding.

lockstep starts this script once per rank; it runs one capability with DGL's public API, the
way a DGL user would, and writes the outputs lockstep checks (see scenarios/README.md,
"Systems under test"). Works with DGL 1.1.3 and 2.1.0 (the PyTorch backend):

  lookup     dgl.distributed.RangePartitionBook.nid2partid / nid2localnid on torch tensors of
             the ids as given (int64, int32, float64); whatever DGL raises is recorded as a
             rejection. nid2localnid only answers for the book's own partition, so there is
             one book per partition and book p is asked about partition p.
  sampling   dgl.sampling.sample_neighbors(g, frontier, fanout, edge_dir="in") once per hop;
             the frontier of hop h+1 is the frontier of hop h plus every node it reached.
             dgl.seed(sampler_seed) before each in-process repeat. `--threads N` sets DGL's
             OpenMP threads (dgl.utils.set_num_threads): with more than one, DGL seeds each
             thread's generator with seed + a thread id handed out in arrival order, so fresh
             processes may draw differently.
  embedding  dgl.distributed.DistEmbedding in standalone mode (world size 1) trained with
             dgl.distributed.optim.SparseAdagrad or SparseAdam:
                 opt.zero_grad(); rows = emb(ids); (rows * grads).sum().backward(); opt.step()
             `--no-zero-grad` is the loop of DistEmbedding's docstring, which never calls
             zero_grad(): DGL then applies every earlier step's gradients again.
             DGL averages duplicate ids' gradients, counts Adam's steps per row and uses its
             own Adam formula (eps added to sqrt(v_hat)); the scenarios declare that in
             [system.profile].
"""
import argparse
import os

import numpy as np

import lockstep_sut


def lookup(inp, out, dgl, th):
    from dgl.distributed.graph_partition_book import RangePartitionBook

    offsets = np.asarray(inp.array("part_offsets"), dtype=np.int64)
    parts = len(offsets) - 1
    etype = ("_N", "_E", "_N")

    def book(part_id):
        # node_map: [start, end) per partition; DGL needs a (trivial) edge map as well.
        return RangePartitionBook(part_id=part_id, num_parts=parts,
                                  node_map={"_N": np.stack([offsets[:-1], offsets[1:]], 1)},
                                  edge_map={etype: np.zeros((parts, 2), np.int64)},
                                  ntypes={"_N": 0}, etypes={etype: 0})

    books = [book(p) for p in range(parts)]

    def nid2localnid(ids, asked):
        result = th.zeros_like(ids)
        for p in range(parts):
            mask = th.from_numpy(asked == p)
            if bool(mask.any()):
                result[mask] = books[p].nid2localnid(ids[mask], p)
        return result

    for group in inp.config["groups"]:
        out.progress("lookup " + group)
        ids = th.from_numpy(np.array(inp.share("ids." + group)))  # the dtype as given
        if group.startswith("partid."):
            out.attempt(group, lambda: books[0].nid2partid(ids))
        else:
            asked = np.array(inp.share("parts." + group))
            out.attempt(group, lambda: nid2localnid(ids, asked))


def sampling(inp, out, dgl, th):
    src = th.from_numpy(np.array(inp.array("edges_src")))
    dst = th.from_numpy(np.array(inp.array("edges_dst")))
    g = dgl.graph((src, dst), num_nodes=int(inp.config["num_nodes"]))  # edge id i = (src[i], dst[i])
    fanouts, replace = inp.config["fanouts"], bool(inp.config["replace"])
    seed = int(inp.config["sampler_seed"])

    def sample(nodes, fanout):
        sg = dgl.sampling.sample_neighbors(g, th.tensor(nodes, dtype=th.int64), fanout,
                                           edge_dir="in", replace=replace)
        s, d = sg.edges()
        return s, d, sg.edata[dgl.EID]

    for k in range(int(inp.config["repeats"])):
        dgl.seed(seed)
        rows = []
        for b, seeds in inp.batches():
            out.progress("sampling repeat %d batch %d" % (k, b))
            frontier = list(dict.fromkeys(seeds.tolist()))
            for h, fanout in enumerate(fanouts):
                if not frontier:
                    break
                s, d, eid = sample(frontier, fanout)
                rows.append(lockstep_sut.edge_rows(b, h, d, s, eid))
                frontier = list(dict.fromkeys(frontier + s.tolist()))
        out.save("edges.repeat%d" % k, np.concatenate(rows) if rows else np.zeros((0, 5), np.int64))

    u = inp.config["uniformity"]
    if u and inp.rank == 0:
        out.progress("uniformity: %d calls" % u["calls"])
        dgl.seed(seed + 1)
        rows = []
        for call in range(int(u["calls"])):
            s, _, eid = sample([int(u["node"])], int(u["fanout"]))
            rows.append(np.column_stack([np.full(len(eid), call), s.numpy(), eid.numpy()]))
        out.save("uniformity", np.concatenate(rows).astype(np.int64))


def embedding(inp, out, dgl, th, zero_grad):
    from dgl.distributed.graph_partition_book import PartitionPolicy, RangePartitionBook

    if inp.world_size != 1:
        raise ValueError("this adapter runs DistEmbedding in standalone mode: world_size must be 1")
    cfg = inp.config["optimizer"]
    n, dim = int(inp.config["num_embeddings"]), int(inp.config["dim"])
    init = th.from_numpy(np.array(inp.array("init"), dtype=np.float32))

    os.environ.setdefault("DGL_DIST_MODE", "standalone")
    dgl.distributed.initialize(None)           # standalone: no ip_config, no servers
    if not th.distributed.is_initialized():    # 2.1.0's step() asks for the process group's backend
        th.distributed.init_process_group("gloo")  # env://, as under torchrun
    etype = ("_N", "_E", "_N")
    gpb = RangePartitionBook(0, 1, {"_N": np.array([[0, n]])}, {etype: np.array([[0, 0]])},
                             {"_N": 0}, {etype: 0})
    emb = dgl.distributed.DistEmbedding(n, dim, name="emb", part_policy=PartitionPolicy("node~_N", gpb),
                                        init_func=lambda shape, dtype: init.clone())
    if cfg["kind"] == "adagrad":
        opt = dgl.distributed.optim.SparseAdagrad([emb], lr=cfg["lr"], eps=cfg["eps"])
    elif cfg["kind"] == "adam":
        opt = dgl.distributed.optim.SparseAdam([emb], lr=cfg["lr"], eps=cfg["eps"],
                                               betas=(cfg["beta1"], cfg["beta2"]))
    else:
        raise ValueError("dgl.distributed.optim has no sparse %s optimizer" % cfg["kind"])
    everything = th.arange(n)

    for t, ids, grads in inp.steps():
        out.progress("embedding step %d" % t)
        if zero_grad:
            opt.zero_grad()
        rows = emb(th.from_numpy(ids.astype(np.int64)))
        out.save("pulled.step%d" % t, rows)
        (rows * th.from_numpy(np.array(grads, dtype=np.float32))).sum().backward()
        opt.step()
        out.save("table.step%d" % t, emb.weight[everything])
        state = opt._state[emb.name]           # Adagrad: sum; Adam: (step, m, v), one row per id
        if cfg["kind"] == "adagrad":
            out.save("state_sum.step%d" % t, state[everything])
        else:
            out.save("state_m.step%d" % t, state[1][everything])
            out.save("state_v.step%d" % t, state[2][everything])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=0, help="DGL's OpenMP threads (0: DGL's default)")
    parser.add_argument("--no-zero-grad", action="store_true", help="DistEmbedding's docstring loop")
    args = parser.parse_args()
    inp, out = lockstep_sut.start()
    out.progress("importing dgl")
    import torch as th
    import dgl
    out.progress("imported dgl %s" % dgl.__version__)
    out.system(dgl=dgl.__version__, torch=th.__version__)
    if args.threads:
        dgl.utils.set_num_threads(args.threads)
    if inp.capability == "lookup":
        lookup(inp, out, dgl, th)
    elif inp.capability == "sampling":
        sampling(inp, out, dgl, th)
    else:
        embedding(inp, out, dgl, th, zero_grad=not args.no_zero_grad)
    out.finish()


if __name__ == "__main__":
    lockstep_sut.main_guard(main)
