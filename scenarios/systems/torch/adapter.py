"""A plain PyTorch system under test: torch.nn.Embedding(sparse=True) trained with torch.optim.

The loop is the one a PyTorch user writes:

    optimizer.zero_grad()
    rows = emb(ids)                      # what this rank pulls (saved before the update)
    (rows * grads).sum().backward()      # d loss / d rows = grads; duplicate ids accumulate
    optimizer.step()                     # SGD, Adagrad or SparseAdam

At world size 2 every rank holds the whole table and computes the gradient of its own share
of the batch; a hook on the weight all_gathers the ranks' sparse gradients (ids and rows) in
rank order before they reach .grad, so every rank applies the gradient of the whole global
batch, its entries in global batch order, exactly as world size 1 does (the gloo backend,
init_method="env://", against the store lockstep hosts).

Embedding bags (config["bags"]): the same loop with torch.nn.EmbeddingBag(mode="sum" or "mean",
sparse=True, include_last_offset=True), fed each rank's ids, offsets and per-sample weights;
what it saves is the pooled rows, and its sparse gradient (one entry per id, duplicates
uncoalesced) goes through the same hook.

`--no-zero-grad` drops optimizer.zero_grad(): a real bug, since PyTorch then adds each step's
sparse gradient to the stale ones of all earlier steps.

Training: a data-parallel GraphSAGE step written with torch.distributed, as a user writes it
without a GNN library: mean aggregation with index_add_, softmax cross-entropy summed over the
rank's seeds, backward, all_reduce(SUM) of the gradient divided by the global batch size,
torch.optim.SGD (momentum) or Adam. In bf16 mode the inputs and hidden activations are rounded
to bf16 (fp32 master weights and accumulation). `--local-mean` is a classic data-parallel bug:
each rank averages over its own batch and the ranks' means are averaged, which weighs samples
unequally when the shares differ in size. `--no-grad-sync` skips the all_reduce: the replicas
diverge.
"""
import argparse

import numpy as np
import torch
import torch.distributed as dist

import lockstep_sut


def gather_sparse_grad(grad):
    """Tensor hook: this rank's sparse gradient -> the concatenation of every rank's, in rank
    order (all_gather needs equal sizes, so the entries are padded to the largest count)."""
    ws = dist.get_world_size()
    idx, val = grad._indices()[0], grad._values()
    counts = [torch.zeros(1, dtype=torch.int64) for _ in range(ws)]
    dist.all_gather(counts, torch.tensor([idx.numel()]))
    most = max(1, int(max(counts)))  # gloo cannot gather empty tensors
    pad_idx = torch.zeros(most, dtype=idx.dtype)
    pad_val = torch.zeros(most, val.shape[1], dtype=val.dtype)
    pad_idx[:idx.numel()], pad_val[:idx.numel()] = idx, val
    all_idx = [torch.empty_like(pad_idx) for _ in range(ws)]
    all_val = [torch.empty_like(pad_val) for _ in range(ws)]
    dist.all_gather(all_idx, pad_idx)
    dist.all_gather(all_val, pad_val)
    idx = torch.cat([i[:int(n)] for i, n in zip(all_idx, counts)])
    val = torch.cat([v[:int(n)] for v, n in zip(all_val, counts)])
    return torch.sparse_coo_tensor(idx[None], val, grad.shape)


def embedding(inp, out, zero_grad):
    opt = inp.config["optimizer"]
    bags = inp.config.get("bags")
    if bags is None:
        emb = torch.nn.Embedding(inp.config["num_embeddings"], inp.config["dim"], sparse=True)
    else:
        emb = torch.nn.EmbeddingBag(inp.config["num_embeddings"], inp.config["dim"], mode=bags["pooling"], sparse=True,
                                    include_last_offset=True)
    with torch.no_grad():
        emb.weight.copy_(torch.from_numpy(np.array(inp.array("init"), dtype=np.float32)))
    if inp.world_size > 1:
        emb.weight.register_hook(gather_sparse_grad)
    if opt["kind"] == "sgd":
        optimizer = torch.optim.SGD(emb.parameters(), lr=opt["lr"])
    elif opt["kind"] == "adagrad":
        optimizer = torch.optim.Adagrad(emb.parameters(), lr=opt["lr"], eps=opt["eps"],
                                        initial_accumulator_value=opt["initial_accumulator_value"])
    else:
        optimizer = torch.optim.SparseAdam(emb.parameters(), lr=opt["lr"], eps=opt["eps"],
                                           betas=(opt["beta1"], opt["beta2"]))
    for t, ids, offsets, weights, grads in inp.bag_steps() if bags else [(t, i, None, None, g) for t, i, g in inp.steps()]:
        out.progress("step %d" % t)
        if zero_grad:
            optimizer.zero_grad()
        if bags is None:
            rows = emb(torch.tensor(ids))
            out.save("pulled.step%d" % t, rows)
        else:
            rows = emb(torch.tensor(ids), torch.tensor(offsets),
                       per_sample_weights=None if weights is None else torch.tensor(weights))
            out.save("pooled.step%d" % t, rows)
        (rows * torch.tensor(grads)).sum().backward()
        optimizer.step()
        if inp.rank == 0:
            out.save("table.step%d" % t, emb.weight)
            state = optimizer.state[emb.weight]
            for key, name in [("sum", "state_sum"), ("exp_avg", "state_m"), ("exp_avg_sq", "state_v")]:
                if key in state:
                    out.save("%s.step%d" % (name, t), state[key])


def training(inp, out, bugs):
    cfg, opt = inp.config, inp.config["optimizer"]
    ws = inp.world_size
    params = torch.tensor(np.array(inp.array("params")), requires_grad=True)
    if opt["kind"] == "sgd":
        optimizer = torch.optim.SGD([params], lr=opt["lr"], momentum=opt["momentum"])
    else:
        optimizer = torch.optim.Adam([params], lr=opt["lr"], betas=(opt["beta1"], opt["beta2"]), eps=opt["eps"])
    bf16 = cfg["precision"] != "fp32"
    act = torch.nn.functional.silu if cfg["activation"] == "silu" else torch.relu
    layers = cfg["layers"]
    losses = []
    for t in range(int(cfg["steps"])):
        out.progress("train step %d" % t)
        b = inp.training_batch(t)
        optimizer.zero_grad()
        h = torch.from_numpy(b["inputs"])
        if bf16:
            h = h.bfloat16().float()                     # collate: the one place the batch changes precision
        for l, shape in enumerate(layers):
            blk = b["blocks"][len(layers) - 1 - l]
            n_in, n_out = shape["in"], shape["out"]
            w_self = params[shape["w_self"]:shape["w_self"] + n_in * n_out].view(n_in, n_out)
            w_neigh = params[shape["w_neigh"]:shape["w_neigh"] + n_in * n_out].view(n_in, n_out)
            bias = params[shape["bias"]:shape["bias"] + n_out]
            src, dst = torch.from_numpy(blk["edge_src"]), torch.from_numpy(blk["edge_dst"])
            n_dst = len(blk["dst_nodes"])
            agg = torch.zeros(n_dst, n_in).index_add_(0, dst, h[src])
            agg = agg / torch.bincount(dst, minlength=n_dst).clamp(min=1).unsqueeze(1).float()
            z = h[:n_dst] @ w_self + agg @ w_neigh + bias
            h = act(z) if l < len(layers) - 1 else z
            if bf16 and l < len(layers) - 1:
                h = h.bfloat16().float()
        labels = torch.from_numpy(b["labels"])
        logits = h[torch.from_numpy(b["seed_to_output"])]
        global_size = cfg["global_batch_sizes"][t]
        if "local-mean" in bugs:
            loss = torch.nn.functional.cross_entropy(logits, labels, reduction="mean") if len(labels) else params.sum() * 0
        else:
            loss = torch.nn.functional.cross_entropy(logits, labels, reduction="sum")
        loss.backward()
        total = torch.tensor([loss.item() * (len(labels) if "local-mean" in bugs else 1)], dtype=torch.float64)
        if ws > 1:
            if "no-grad-sync" not in bugs:
                dist.all_reduce(params.grad)
            dist.all_reduce(total)
        params.grad /= ws if "local-mean" in bugs else global_size
        optimizer.step()
        losses.append(total.item() / global_size)
    out.save("params.final", params)
    if inp.rank == 0:
        out.save("loss", np.array(losses, dtype=np.float32))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--no-zero-grad", dest="zero_grad", action="store_false")
    parser.add_argument("--bug", action="append", default=[], help="training: local-mean, no-grad-sync")
    args = parser.parse_args()
    torch.set_num_threads(1)  # the ranks share the machine's cores
    inp, out = lockstep_sut.start()
    out.system(torch=torch.__version__)
    if inp.world_size > 1:
        dist.init_process_group("gloo", init_method="env://")
    if inp.capability == "embedding":
        embedding(inp, out, args.zero_grad)
    else:
        training(inp, out, args.bug)
    out.finish()
    if inp.world_size > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    lockstep_sut.main_guard(main)
