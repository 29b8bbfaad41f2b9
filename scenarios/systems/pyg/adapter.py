"""PyG (torch_geometric 2.8) as a system under test: its partition book in a LocalGraphStore, the
per-partition LocalFeatureStore, and the split of PyG's multi-GPU example, each done as PyG does them.

lockstep starts this script once per rank (see scenarios/README.md, "Systems under test"):

  lookup  nid2partid: PyG keeps the partition book as a tensor, node -> partition (any
          assignment, lockstep's range or map book; torch_geometric.distributed's partitioner
          writes it), held by LocalGraphStore (node_pb), whose get_partition_ids_from_nids(ids)
          indexes it: node_pb[ids]. nid2localnid(ids, p) and the feature store: partition p's
          LocalFeatureStore holds the rows of its own global ids, ascending (put_global_id, put_tensor); get_tensor_from_global_id(index=ids)
          returns their rows: attribute "row" holds each row's local index (the local id),
          attribute "x" the node features. PyG rejects by raising, so each call goes through
          out.attempt_each: when the share raises, every id is asked again on its own, and
          only the ids that raise are rejected (an IndexError for one id past a store's table
          no longer hides the wrong rows beside it).
  split   examples/multi_gpu: train_idx.split(train_idx.size(0) // world_size)[rank], and a
          loader of batch_size over it on each rank (ceil(len / batch_size) steps).
"""
import math
import warnings

import numpy as np
import torch

import lockstep_sut

warnings.simplefilter("ignore")  # torch_geometric.distributed is deprecated since PyG 2.7
from torch_geometric.distributed import LocalFeatureStore, LocalGraphStore  # noqa: E402


def lookup(inp, out):
    if inp.config.get("book", "range") == "map":
        partition_book = torch.from_numpy(np.array(inp.array("part_of"))).to(torch.int64)
    else:
        offsets = torch.from_numpy(np.array(inp.array("part_offsets")))
        partition_book = torch.repeat_interleave(torch.arange(offsets.numel() - 1), offsets[1:] - offsets[:-1])
    # The node partition book as PyG's samplers consult it: LocalGraphStore.get_partition_ids_from_nids.
    graph_store = LocalGraphStore()
    graph_store.node_pb = partition_book
    graph_store.meta = {"is_hetero": False}  # what from_partition reads from a homogeneous partition's META.json
    features = torch.from_numpy(np.array(inp.array("features"))) if "features" in inp.names() else None
    stores = []
    for p in range(int(inp.config["num_parts"])):
        nodes = (partition_book == p).nonzero().view(-1)  # ascending: row i holds the i-th smallest id
        store = LocalFeatureStore()
        store.put_global_id(nodes, group_name=None)
        store.put_tensor(torch.arange(nodes.numel()).view(-1, 1), group_name=None, attr_name="row")
        if features is not None:
            store.put_tensor(features[nodes], group_name=None, attr_name="x")
        stores.append(store)

    def from_stores(ids, parts, attr, width):
        """Each id's row of `attr` from the store of the partition asked for it."""
        result = torch.zeros((ids.numel(), width), dtype=torch.float32 if attr == "x" else torch.int64)
        for p in torch.unique(parts).tolist():
            mask = parts == p
            result[mask] = stores[p].get_tensor_from_global_id(group_name=None, attr_name=attr, index=ids[mask]).to(result.dtype)
        return result

    def rows(ids, parts):
        return from_stores(ids, parts, "row", 1).view(-1).to(ids.dtype)

    def rows_and_features(ids, parts):
        return rows(ids, parts), from_stores(ids, parts, "x", features.shape[1])

    for group in inp.config["groups"]:
        ids = torch.from_numpy(inp.share("ids." + group))
        if group.startswith("partid."):
            out.attempt_each(group, graph_store.get_partition_ids_from_nids, ids)
        elif group.startswith("localnid."):
            out.attempt_each(group, rows, ids, torch.from_numpy(inp.share("parts." + group)))
        else:
            out.attempt_each([group, group + ".features"], rows_and_features, ids, torch.from_numpy(inp.share("parts." + group)))


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
