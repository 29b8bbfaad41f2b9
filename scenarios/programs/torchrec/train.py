"""A recommendation model trained with TorchRec (no lockstep code in it), on the CPU with Gloo:
two embedding tables in an EmbeddingBagCollection sharded by DistributedModelParallel (one
table-wise on rank 0, one row-wise over every rank, fbgemm's fused row-wise Adagrad applied in the
backward pass), a dense MLP over the pooled embeddings that DistributedModelParallel wraps in DDP,
TorchRec's CombinedOptimizer of the fused and a dense (Adam) optimizer, and a loss all-reduced
for logging. Each step moves the batch's ids to the ranks that hold their rows and the pooled rows
back (all-to-all of lengths and ids, then of pooled rows; the row-wise table's pooled rows come
back by reduce-scatter), and DDP all-reduces the dense gradients. Deterministic: the same seed
gives the same parameters on every run. World size 2 (or more).

  --steps N          iterations (default 5)
  --digest-out PATH  rank 0 writes a 63-bit digest of every rank's final parameters and shards
  --bug ids-dtype    at step 2 rank 1 sends its ids as int32 where rank 0 sends int64: the
                     all-to-all that routes ids to the ranks holding their rows differs in dtype
  --bug batch        at step 3 rank 1 draws a batch of 6 where rank 0 draws 8: the reduce-scatter
                     of the row-wise table's pooled rows differs in count
"""
import argparse
import hashlib

import torch
import torch.distributed as dist
from fbgemm_gpu.split_embedding_configs import EmbOptimType
from torchrec import EmbeddingBagCollection, EmbeddingBagConfig, KeyedJaggedTensor
from torchrec.distributed import DistributedModelParallel
from torchrec.distributed.embedding_types import EmbeddingComputeKernel
from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
from torchrec.distributed.sharding_plan import construct_module_sharding_plan, row_wise, table_wise
from torchrec.distributed.types import ShardingPlan
from torchrec.optim.keyed import CombinedOptimizer, KeyedOptimizerWrapper
from torchrec.optim.optimizers import in_backward_optimizer_filter

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=5)
p.add_argument("--digest-out", default="")
p.add_argument("--bug", choices=["none", "ids-dtype", "batch"], default="none")
args = p.parse_args()

torch.set_num_threads(1)  # the ranks share the machine's cores
dist.init_process_group("gloo")
r, ws = dist.get_rank(), dist.get_world_size()
DIM, BATCH = 8, 8
TABLES = {"user": 40, "item": 101}  # name: rows


class Model(torch.nn.Module):
    def __init__(self, device):
        super().__init__()
        self.ebc = EmbeddingBagCollection(
            tables=[EmbeddingBagConfig(name=t, embedding_dim=DIM, num_embeddings=n, feature_names=[t + "_id"])
                    for t, n in TABLES.items()],
            device=device)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(DIM * len(TABLES), 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))

    def forward(self, kjt):
        pooled = self.ebc(kjt)
        return self.mlp(torch.cat([pooled[t + "_id"] for t in TABLES], dim=1)).squeeze(1)


torch.manual_seed(0)
model = Model(torch.device("meta"))
model.mlp = torch.nn.Sequential(torch.nn.Linear(DIM * len(TABLES), 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
sharder = EmbeddingBagCollectionSharder(fused_params={"optimizer": EmbOptimType.EXACT_ROWWISE_ADAGRAD,
                                                      "learning_rate": 0.05, "eps": 1e-8})
# TorchRec's planner offers only table-wise sharding on the CPU: the plan is written by hand, as
# TorchRec's own tests do.
fused = EmbeddingComputeKernel.FUSED.value
plan = ShardingPlan({"ebc": construct_module_sharding_plan(
    model.ebc, {"user": table_wise(rank=0, compute_kernel=fused), "item": row_wise(compute_kernel=fused)},
    sharder=sharder, local_size=ws, world_size=ws, device_type="cpu")})
model = DistributedModelParallel(model, device=torch.device("cpu"), plan=plan, sharders=[sharder])
dense = KeyedOptimizerWrapper(dict(in_backward_optimizer_filter(model.named_parameters())),
                              lambda params: torch.optim.Adam(params, lr=0.01))
opt = CombinedOptimizer([model.fused_optimizer, dense])
gen = torch.Generator().manual_seed(100 + r)  # every rank its own batches


def batch(step):
    n = 6 if args.bug == "batch" and r == 1 and step == 3 else BATCH
    lengths, values = [], []
    for t, rows in TABLES.items():
        ln = torch.randint(1, 4, (n,), generator=gen, dtype=torch.int32)
        lengths.append(ln)
        values.append(torch.randint(0, rows, (int(ln.sum()),), generator=gen))
    ids = torch.cat(values)
    if args.bug == "ids-dtype" and r == 1 and step == 2:
        ids = ids.to(torch.int32)
    kjt = KeyedJaggedTensor(keys=[t + "_id" for t in TABLES], values=ids, lengths=torch.cat(lengths))
    return kjt, torch.randint(0, 2, (n,), generator=gen).float()


for step in range(args.steps):
    kjt, labels = batch(step)
    loss = torch.nn.functional.binary_cross_entropy_with_logits(model(kjt), labels)
    opt.zero_grad()
    loss.backward()
    opt.step()
    report = loss.detach().clone()
    dist.all_reduce(report)

# Every rank's dense parameters (the same on every rank) and its shards of the tables.
h = hashlib.blake2b(digest_size=8)
for name, t in sorted(model.state_dict().items()):
    for shard in (t.local_shards() if hasattr(t, "local_shards") else []):
        h.update(name.encode() + shard.tensor.detach().contiguous().numpy().tobytes())
    if not hasattr(t, "local_shards"):
        h.update(name.encode() + t.detach().contiguous().numpy().tobytes())
mine = torch.tensor([int.from_bytes(h.digest(), "little") >> 1], dtype=torch.int64)
every = [torch.zeros(1, dtype=torch.int64) for _ in range(ws)]
dist.all_gather(every, mine)
if r == 0:
    total = hashlib.blake2b(b"".join(int(e.item()).to_bytes(8, "little") for e in every), digest_size=8)
    digest = int.from_bytes(total.digest(), "little") >> 1
    if args.digest_out:
        with open(args.digest_out, "w") as f:
            f.write("%d\n" % digest)
    print("train.py: %d steps on %d ranks (torch %s), loss %.4f, digest %x" % (args.steps, ws, torch.__version__, report.item() / ws, digest))
dist.destroy_process_group()
