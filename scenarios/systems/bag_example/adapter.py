"""The README's embedding-bag example: torch.nn.EmbeddingBag with SGD as a system under test,
one rank (scenarios/systems/torch/adapter.py does several ranks and every optimizer)."""
import numpy as np
import torch

import lockstep_sut

inp, out = lockstep_sut.start()
cfg = inp.config
bag = torch.nn.EmbeddingBag(cfg["num_embeddings"], cfg["dim"], mode=cfg["bags"]["pooling"],
                            sparse=True, include_last_offset=True)
with torch.no_grad():
    bag.weight.copy_(torch.from_numpy(np.array(inp.array("init"))))
sgd = torch.optim.SGD(bag.parameters(), lr=cfg["optimizer"]["lr"])
for t, ids, offsets, weights, grads in inp.bag_steps():     # this rank's bags, step by step
    sgd.zero_grad()
    pooled = bag(torch.from_numpy(ids), torch.from_numpy(offsets),
                 per_sample_weights=None if weights is None else torch.from_numpy(weights))
    out.save("pooled.step%d" % t, pooled)                    # one row per bag, before the update
    (pooled * torch.from_numpy(grads)).sum().backward()      # d loss / d pooled = grads
    sgd.step()
    out.save("table.step%d" % t, bag.weight)                 # the table after the step
out.finish()
