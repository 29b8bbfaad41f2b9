"""PyG (torch_geometric 2.8) as a system under test: its partition book and per-partition
LocalFeatureStore, and the split of PyG's multi-GPU example, each done as PyG does them.

lockstep starts this script once per rank (see scenarios/README.md, "Systems under test"):

  lookup  nid2partid: PyG keeps the partition book as a tensor, node -> partition (any
          assignment; torch_geometric.distributed's partitioner writes it), and looks ids up
          by indexing it: partition_book[ids]. nid2localnid(ids, p): partition p's
          LocalFeatureStore holds the rows of its own global ids (put_global_id, put_tensor);
          get_tensor_from_global_id(index=ids) returns their rows. Here the stored feature is
          each row's local index, so the row returned is the local id. Whatever PyG raises is
          recorded as a rejection.
  split   examples/multi_gpu: train_idx.split(train_idx.size(0) // world_size)[rank], and a
          loader of batch_size over it on each rank (ceil(len / batch_size) steps).
"""
import math
import warnings

import numpy as np
import torch

import lockstep_sut

warnings.simplefilter("ignore")  # torch_geometric.distributed is deprecated since PyG 2.7
from torch_geometric.distributed import LocalFeatureStore  # noqa: E402


def lookup(inp, out):
    offsets = torch.from_numpy(np.array(inp.array("part_offsets")))
    sizes = offsets[1:] - offsets[:-1]
    partition_book = torch.repeat_interleave(torch.arange(sizes.numel()), sizes)
    stores = []
    for p in range(sizes.numel()):
        store = LocalFeatureStore()
        store.put_global_id(torch.arange(int(offsets[p]), int(offsets[p + 1])), group_name=None)
        store.put_tensor(torch.arange(int(sizes[p])).view(-1, 1), group_name=None, attr_name="row")
        stores.append(store)

    def nid2localnid(ids, parts):
        result = torch.empty_like(ids)
        for p in torch.unique(parts).tolist():
            mask = parts == p
            rows = stores[p].get_tensor_from_global_id(group_name=None, attr_name="row", index=ids[mask])
            result[mask] = rows.view(-1).to(ids.dtype)
        return result.numpy()

    for group in inp.config["groups"]:
        ids = torch.from_numpy(inp.share("ids." + group))
        if group.startswith("partid."):
            out.attempt(group, lambda: partition_book[ids].numpy())
        else:
            parts = torch.from_numpy(inp.share("parts." + group))
            out.attempt(group, lambda: nid2localnid(ids, parts))


def split(inp, out):
    train_idx = torch.from_numpy(np.array(inp.array("ids")))
    mine = train_idx.split(train_idx.size(0) // inp.world_size)[inp.rank]
    out.save("ids", mine.numpy().astype(np.int64))
    out.save("steps", np.array([math.ceil(mine.numel() / int(inp.config["batch_size"]))], dtype=np.int64))


def main():
    inp, out = lockstep_sut.start()
    import torch_geometric
    out.system(torch_geometric=torch_geometric.__version__, torch=torch.__version__)
    {"lookup": lookup, "split": split}[inp.capability](inp, out)
    out.finish()


if __name__ == "__main__":
    lockstep_sut.main_guard(main)
