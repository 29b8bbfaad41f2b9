"""TorchRec 1.9 as a system under test: a row-wise sharded EmbeddingBagCollection on Gloo/CPU.

lockstep starts this script once per rank (see scenarios/README.md, "Systems under test"). It
builds what a TorchRec user builds: one table in an EmbeddingBagCollection (SUM pooling), a
ROW_WISE sharding plan with the FUSED compute kernel, and DistributedModelParallel over a Gloo
process group (world size 1 too). The optimizer is
TorchRec's fused one, set through the sharder's fused_params: EXACT_SGD for `sgd`,
EXACT_ROWWISE_ADAGRAD for `rowwise_adagrad`; the update runs inside backward.

The contract has one id per sample, so every bag holds one id (KJT lengths all 1): SUM pooling
of one row is that row. Each step:

    pooled = model(kjt)["ids"]              # this rank's rows (saved before the update)
    (pooled * grads).sum().backward()       # fbgemm's TBE backward applies the optimizer

After each step every rank gathers the table's row-wise shards (and the optimizer's row-wise
state) to rank 0, which saves them. TorchRec's defaults are left as they are: its sharded
backward divides gradients by the world size (torchrec.distributed.comm_ops
GRADIENT_DIVISION) and fbgemm's bounds check is BoundsCheckMode.WARNING; a scenario declares
them in [system.profile] or not. `--bounds-check MODE` (fatal, warning, ignore, none) passes
fbgemm's mode explicitly; `--no-gradient-division` calls comm_ops.set_gradient_division(False).

Ids outside the table (bad_id_groups): after the steps rank 0 pulls and steps each group. The
sharded forward is a collective, so the other ranks run the same call with as many ids, all
row 0 with zero gradients (SGD: w - lr * 0 = w).
"""
import argparse
import importlib.metadata
import os
import sys

import numpy as np
import torch
import torch.distributed as dist

import lockstep_sut

TABLE, FEATURE = "table", "ids"


def build(inp, args):
    from fbgemm_gpu.split_embedding_configs import EmbOptimType
    from fbgemm_gpu.split_table_batched_embeddings_ops_common import BoundsCheckMode
    from torchrec import EmbeddingBagCollection, EmbeddingBagConfig, PoolingType
    from torchrec.distributed import DistributedModelParallel
    from torchrec.distributed.embedding_types import EmbeddingComputeKernel
    from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
    from torchrec.distributed.sharding_plan import construct_module_sharding_plan, row_wise
    from torchrec.distributed.types import ShardingPlan

    opt = inp.config["optimizer"]
    kinds = {"sgd": EmbOptimType.EXACT_SGD, "rowwise_adagrad": EmbOptimType.EXACT_ROWWISE_ADAGRAD}
    if opt["kind"] not in kinds:
        raise ValueError("this adapter runs sgd and rowwise_adagrad, not %r" % opt["kind"])
    fused = {"optimizer": kinds[opt["kind"]], "learning_rate": opt["lr"]}
    if opt["kind"] == "rowwise_adagrad":
        fused["eps"] = opt["eps"]
    if args.bounds_check:
        fused["bounds_check_mode"] = BoundsCheckMode[args.bounds_check.upper()]
    sharder = EmbeddingBagCollectionSharder(fused_params=fused)
    ebc = EmbeddingBagCollection(
        tables=[EmbeddingBagConfig(name=TABLE, embedding_dim=inp.config["dim"],
                                   num_embeddings=inp.config["num_embeddings"],
                                   feature_names=[FEATURE], pooling=PoolingType.SUM)],
        device=torch.device("meta"))
    # The planner offers ROW_WISE only for cuda and tpu devices (EmbeddingBagCollectionSharder's
    # sharding_types), so the plan is written by hand, as TorchRec's own tests do.
    module_plan = construct_module_sharding_plan(
        ebc, {TABLE: row_wise(compute_kernel=EmbeddingComputeKernel.FUSED.value)}, sharder=sharder,
        local_size=inp.world_size, world_size=inp.world_size, device_type="cpu")
    plan = ShardingPlan({"": module_plan})
    return DistributedModelParallel(ebc, device=torch.device("cpu"), plan=plan, sharders=[sharder])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bounds-check", choices=["fatal", "warning", "ignore", "none"])
    parser.add_argument("--no-gradient-division", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)  # the ranks share the machine's cores
    inp, out = lockstep_sut.start()
    from torchrec.distributed import comm_ops
    out.system(torchrec=importlib.metadata.version("torchrec"),
               fbgemm_gpu=importlib.metadata.version("fbgemm-gpu-cpu"), torch=torch.__version__)
    if args.no_gradient_division:
        comm_ops.set_gradient_division(False)
    dist.init_process_group("gloo", init_method="env://")
    from torchrec import KeyedJaggedTensor

    model = build(inp, args)
    weight_key = "embedding_bags.%s.weight" % TABLE
    n, dim = inp.config["num_embeddings"], inp.config["dim"]
    init = torch.from_numpy(np.array(inp.array("init"), dtype=np.float32))
    weight = model.state_dict()[weight_key]
    with torch.no_grad():
        for shard in weight.local_shards():
            lo, rows = shard.metadata.shard_offsets[0], shard.metadata.shard_sizes[0]
            shard.tensor.copy_(init[lo:lo + rows])
    rowwise = inp.config["optimizer"]["kind"] == "rowwise_adagrad"

    def state_sum():
        """The row-wise Adagrad state (fbgemm's momentum1), [N] ShardedTensor."""
        state = model.fused_optimizer.state_dict()["state"][weight_key]
        return state["%s.momentum1" % TABLE]

    def gather(st, shape):
        full = torch.empty(shape, dtype=torch.float32) if inp.rank == 0 else None
        st.gather(dst=0, out=full)
        return full

    def pull_and_step(ids, grads):
        kjt = KeyedJaggedTensor(keys=[FEATURE], values=torch.from_numpy(ids),
                                lengths=torch.ones(len(ids), dtype=torch.int32))
        pooled = model(kjt)[FEATURE]
        pulled = pooled.detach().clone()
        (pooled * torch.from_numpy(grads)).sum().backward()
        return pulled

    for t, ids, grads in inp.steps():
        out.progress("step %d" % t)
        out.save("pulled.step%d" % t, pull_and_step(ids, grads))
        table = gather(model.state_dict()[weight_key], (n, dim))
        state = gather(state_sum(), (n,)) if rowwise else None
        if inp.rank == 0:
            out.save("table.step%d" % t, table)
            if rowwise:
                out.save("state_sum.step%d" % t, state)

    for group in inp.config["bad_id_groups"]:
        out.progress("bad ids: " + group)
        ids = np.array(inp.array("bad.%s.ids" % group))
        grads = np.array(inp.array("bad.%s.grads" % group), dtype=np.float32)
        if inp.rank == 0:
            out.attempt("bad.%s.pulled" % group, lambda: pull_and_step(ids, grads))
        else:
            pull_and_step(np.zeros_like(ids), np.zeros_like(grads))
        table = gather(model.state_dict()[weight_key], (n, dim))
        if inp.rank == 0:
            out.save("bad.%s.table" % group, table)
    out.finish()
    dist.barrier()
    dist.destroy_process_group()
    # torch 2.14.1's Gloo worker threads release a collective's Python tensors after the call has
    # completed; when that falls after the interpreter began finalizing, the thread is stopped in
    # PyEval_AcquireThread (pthread_exit through a noexcept frame: "terminate called without an
    # active exception", SIGABRT) after done.json was written, in about 1 run in 3 at world size 2.
    # The adapter's work is finished and written here, so it leaves without finalizing.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    lockstep_sut.main_guard(main)
