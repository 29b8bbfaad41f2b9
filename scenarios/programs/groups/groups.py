"""A plain torch.distributed program (no lockstep code in it) whose collectives run on process
groups of its own besides the default one: pairs from new_subgroups ({0,1}, {2,3}), a group of
ranks 1..3 from new_group, and (torch 2.x) a 2x2 device mesh's dimensions. Every result is checked
against its closed form, so a wrapper that changed one fails the program. World size 4.

  --bug sub-count    rank 2 all-reduces 3 elements on the group of ranks 1..3, the others 2 (round 1)
  --bug sub-root     rank 3 broadcasts on its pair from root 3, rank 2 from root 2 (round 1)
  --bug sub-rs-max   rank 1 reduce-scatters with MAX on the group of ranks 1..3 (round 1; torch 2.x)
  --bug wrong-group  rank 1 all-reduces on the default group where its pair's does (round 1)
"""
import argparse

import torch
import torch.distributed as dist

p = argparse.ArgumentParser()
p.add_argument("--bug", choices=["none", "sub-count", "sub-root", "sub-rs-max", "wrong-group"], default="none")
p.add_argument("--rounds", type=int, default=3)
p.add_argument("--mesh", action="store_true", help="also a 2x2 device mesh (torch 2.x)")
args = p.parse_args()

dist.init_process_group("gloo")
r, ws = dist.get_rank(), dist.get_world_size()
assert ws == 4, "groups.py runs on 4 ranks"
torch2 = int(torch.__version__.split(".")[0]) >= 2
pairs = [dist.new_group([0, 1]), dist.new_group([2, 3])]  # every rank makes both, in one order
pair = pairs[r // 2]
trio = dist.new_group([1, 2, 3])          # every rank calls new_group; rank 0 is not a member
mesh = None
if args.mesh and torch2:
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
# Each round is one step of a tiny model, as a training loop's (a forward at its start, the
# optimizer's step at its end): lockstep numbers the round's calls by it (round i is step i).
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for i in range(args.rounds):
    loss = model(torch.ones(1, 4)).sum()
    bug = i == 1
    t = torch.full((2,), float(r))
    dist.all_reduce(t, group=None if args.bug == "wrong-group" and bug and r == 1 else pair)
    first = r - r % 2
    if args.bug == "none":
        assert torch.equal(t, torch.full((2,), float(2 * first + 1))), t
    b = torch.full((3,), float(r))
    src = first + 1 if args.bug == "sub-root" and bug and r == 3 else first
    dist.broadcast(b, src, group=pair)
    if args.bug == "none":
        assert torch.equal(b, torch.full((3,), float(first))), b
    outs = [torch.empty(1) for _ in range(2)]
    dist.all_gather(outs, torch.tensor([float(r)]), group=pair)
    assert [o.item() for o in outs] == [float(first), float(first + 1)], outs
    if r in (1, 2, 3):
        n = 3 if args.bug == "sub-count" and bug and r == 2 else 2
        s = torch.ones(n)
        dist.all_reduce(s, group=trio)
        if args.bug == "none":
            assert torch.equal(s, torch.full((2,), 3.0)), s
        if torch2:
            out = torch.empty(1)
            op = dist.ReduceOp.MAX if args.bug == "sub-rs-max" and bug and r == 1 else dist.ReduceOp.SUM
            dist.reduce_scatter_tensor(out, torch.arange(3, dtype=torch.float32) + r, op=op, group=trio)
            if args.bug == "none":
                k = dist.get_group_rank(trio, r) if hasattr(dist, "get_group_rank") else r - 1
                assert out.item() == 3 * k + 6, out
        if r == 1:
            dist.send(torch.full((4,), 5.0), 3, group=trio)
        elif r == 3:
            x = torch.empty(4)
            dist.recv(x, 1, group=trio)
            assert torch.equal(x, torch.full((4,), 5.0)), x
    if mesh is not None:
        for dim in ("dp", "tp"):
            g = mesh.get_group(dim)
            m = torch.ones(2)
            dist.all_reduce(m, group=g)
            assert torch.equal(m, torch.full((2,), 2.0)), (dim, m)
    w = torch.ones(1)
    dist.all_reduce(w)
    assert w.item() == ws
    loss.backward()
    opt.step()
    opt.zero_grad()
if r == 0:
    print("groups.py: %d rounds on %d ranks, every result as expected (torch %s)" % (args.rounds, ws, torch.__version__))
dist.destroy_process_group()
