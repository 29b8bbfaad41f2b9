"""A pipeline-style program (no lockstep code in it): two stages on ranks 0 and 1 exchange
activations forward and gradients backward with batch_isend_irecv and isend/irecv, both sides
posting their sends before their receives (which blocks nowhere natively), then all-reduce a loss
with every other rank. Every exchanged tensor is checked against its closed form. World size 2 or
more (ranks past 1 only join the all-reduce).

  --steps N      iterations (default 4)
  --bug tag      at step 2 rank 1 receives the activation with tag 1; rank 0 sends it with tag 0
  --bug dtype    at step 2 rank 0 sends the gradient's f64 copy; rank 1 receives f32
  --bug peer     at step 2 rank 0 sends the gradient to rank 2 instead of rank 1 (3 ranks or more)
"""
import argparse

import torch
import torch.distributed as dist

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=4)
p.add_argument("--bug", choices=["none", "tag", "dtype", "peer"], default="none")
args = p.parse_args()

dist.init_process_group("gloo")
r, ws = dist.get_rank(), dist.get_world_size()
assert ws >= 2 and (args.bug != "peer" or ws >= 3), "pipe.py runs on 2 ranks or more (3 with --bug peer)"
peer = 1 - r


def stage(step):
    """One iteration of a stage: activations forward, gradients backward."""
    # Forward: each stage sends its activation and receives the other's, in one batch.
    mine = torch.full((8,), float(10 * step + r))
    theirs = torch.empty(8)
    tag = 1 if args.bug == "tag" and step == 2 and r == 1 else 0
    ops = [dist.P2POp(dist.isend, mine, peer), dist.P2POp(dist.irecv, theirs, peer, tag=tag)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    assert torch.equal(theirs, torch.full((8,), float(10 * step + peer))), theirs
    # Backward: both post their send first, then their receive.
    grad = torch.full((4,), float(step - r))
    if args.bug == "dtype" and step == 2 and r == 0:
        grad = grad.double()
    got = torch.empty(4)
    s = dist.isend(grad, 2 if args.bug == "peer" and step == 2 and r == 0 else peer)
    q = dist.irecv(got, peer)
    s.wait()
    q.wait()
    if args.bug == "none":
        assert torch.equal(got, torch.full((4,), float(step - peer))), got


# Each stage's own layer, trained a step per iteration (a forward at its start, the optimizer's step
# at its end): lockstep numbers the iteration's calls by it (iteration n is step n).
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(args.steps):
    out = model(torch.ones(1, 8)).sum()
    if r < 2:  # the two stages; ranks past 1 only join the loss
        stage(step)
    out.backward()
    opt.step()
    opt.zero_grad()
    loss = torch.tensor([float(step) if r < 2 else 0.0])
    dist.all_reduce(loss)  # after the optimizer's step: still this iteration's
    assert loss.item() == 2 * step
if r == 0:
    print("pipe.py: %d steps on %d ranks, every exchange as expected (torch %s)" % (args.steps, ws, torch.__version__))
dist.destroy_process_group()
