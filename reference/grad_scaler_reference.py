"""Python's torch.amp.GradScaler on a fixed sequence; tests/lab03/graded.cpp holds its numbers.

Run: /work/main/.venv/bin/python reference/grad_scaler_reference.py  (torch 2.13.0, CPU)
One float32 parameter w = [1, -2], SGD lr 0.125, loss = sum(w * x). Scaler: init_scale 1024,
growth_factor 2, backoff_factor 0.5, growth_interval 3. Steps: clean, inf, nan, clean x3 (grows), clean.
Every number printed here is a power of two or a sum of a few, so float32 holds it exactly.
"""
import json

import torch

w = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
optimizer = torch.optim.SGD([w], lr=0.125)
scaler = torch.amp.GradScaler("cpu", init_scale=1024.0, growth_factor=2.0, backoff_factor=0.5, growth_interval=3)
inputs = [
    [0.5, 0.25],
    [float("inf"), 1.0],
    [float("nan"), 1.0],
    [0.5, 0.25],
    [1.0, 1.0],
    [0.25, 0.5],
    [2.0, 0.5],
]
rows = []
for x in inputs:
    optimizer.zero_grad()
    loss = (w * torch.tensor(x)).sum()
    scaled = scaler.scale(loss)
    scaled.backward()
    scaled_grad = w.grad.clone().tolist()
    scaler.unscale_(optimizer)
    unscaled_grad = w.grad.clone().tolist()
    before = w.detach().clone()
    scaler.step(optimizer)
    stepped = not torch.equal(before, w.detach())
    scaler.update()
    rows.append({
        "x": x,
        "scaled_grad": scaled_grad,
        "unscaled_grad": unscaled_grad,
        "stepped": stepped,
        "w": w.detach().tolist(),
        "scale": scaler.get_scale(),
        "growth_tracker": scaler.state_dict()["_growth_tracker"],
    })
print(json.dumps({"rows": rows, "state_dict": scaler.state_dict()}, indent=1))
