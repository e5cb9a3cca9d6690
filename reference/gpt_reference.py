#!/usr/bin/env python3
"""The Python PyTorch reference for speedlabs' C++ GPT-2 (common/gpt.h): the parity test's other half.

The C++ side (tests/lab05/test_gpt2.cpp) writes a tensor file (format below) with the model size, the
initial weights, one batch, and what C++ computed from them: logits, loss, every parameter's gradient,
and the losses of 10 AdamW steps on that batch. This script rebuilds the same model in Python, loads
the weights by name, recomputes everything in float32 on the CPU and compares.

    python reference/gpt_reference.py --check STATE_FILE

exits 0 when every comparison is within tolerance, 1 otherwise, 2 on a malformed file.

Tensor file format, version 1 (all integers little-endian), written by speedlabs::gpt::write_tensor_file:
    magic b"SPDLTNSR", uint32 version = 1, uint32 count, then per tensor:
    uint32 name length, name (UTF-8), uint8 dtype (0 float32, 1 int64), uint32 ndim,
    int64 sizes[ndim], the elements in row-major order.

Names in the state file: "config" (int64: block_size, vocab_size, n_layer, n_head, n_embd),
"adamw" (float32: lr, beta1, beta2, eps, weight_decay), "x" and "y" (int64, B x T), "param/<name>"
(initial weights, names as in this model's named_parameters()), "cpp/logits", "cpp/loss",
"cpp/grad/<name>", "cpp/adamw_losses" (the loss before each of the 10 steps).
"""
import argparse
import math
import os
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

MAGIC = b"SPDLTNSR"
VERSION = 1
DTYPES = {0: (torch.float32, 4), 1: (torch.int64, 8)}

# Tolerances: |cpp - python| <= ATOL + RTOL * |python|, element by element, float32 on the CPU.
# Both sides run the same libtorch kernels, but not the same op sequence: C++ uses the fused
# scaled_dot_product_attention and this file the explicit softmax(q k^T / sqrt(d)) v, so sums are taken
# in different orders. One float32 rounding is 6e-8 relative; through a few layers of sums of 64 to 256
# terms the differences grow to ~1e-6 relative (measured: logits ~2e-7, gradients ~1e-9 absolute).
# RTOL = 1e-4 leaves a wide margin; ATOL scales with each tensor's largest value, so that entries near 0
# (where relative error is meaningless) are held to 1e-5 of the tensor's scale. A real bug (a missing
# scale, a wrong mask, an untied head) gives errors of the order of the values themselves.
RTOL = 1e-4
ATOL_FRACTION = 1e-5
# AdamW divides each gradient by its own running RMS, so tiny gradient differences can become update
# differences of up to lr relative for near-zero gradients; 10 steps at lr 1e-3 move the loss by at most
# ~1e-4 through that. 1e-3 nat is well below any real divergence (a wrong update moves the loss by >0.1).
LOSS_ATOL = 1e-3


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.n_head = n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
        y = scores.masked_fill(future, float("-inf")).softmax(dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class MLP(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.c_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = MLP(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, block_size, vocab_size, n_layer, n_head, n_embd):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab_size, n_embd),
            wpe=nn.Embedding(block_size, n_embd),
            h=nn.ModuleList([Block(n_embd, n_head) for _ in range(n_layer)]),
            ln_f=nn.LayerNorm(n_embd),
        ))
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # tied: one tensor, listed once

    def forward(self, idx, targets):
        T = idx.size(1)
        x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(T, device=idx.device))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def read_tensor_file(path):
    with open(path, "rb") as f:
        data = f.read()
    offset = 0

    def take(n):
        nonlocal offset
        if offset + n > len(data):
            raise ValueError(f"{path}: truncated")
        chunk = data[offset:offset + n]
        offset += n
        return chunk

    if take(8) != MAGIC:
        raise ValueError(f"{path}: not a speedlabs tensor file")
    version, count = struct.unpack("<II", take(8))
    if version != VERSION:
        raise ValueError(f"{path}: version {version}, expected {VERSION}")
    tensors = {}
    for _ in range(count):
        (name_length,) = struct.unpack("<I", take(4))
        name = take(name_length).decode("utf-8")
        code, ndim = struct.unpack("<BI", take(5))
        if code not in DTYPES:
            raise ValueError(f"{path}: tensor {name} has unknown dtype code {code}")
        sizes = struct.unpack(f"<{ndim}q", take(8 * ndim))
        dtype, itemsize = DTYPES[code]
        numel = math.prod(sizes)
        raw = bytearray(take(numel * itemsize))
        tensors[name] = (torch.frombuffer(raw, dtype=dtype) if numel else torch.empty(0, dtype=dtype)).reshape(sizes)
    if offset != len(data):
        raise ValueError(f"{path}: bytes after the last tensor")
    return tensors


def write_tensor_file(path, tensors):
    """Writes {name: float32 or int64 tensor} in the format above, through a temporary file and a rename."""
    codes = {dtype: code for code, (dtype, _) in DTYPES.items()}
    chunks = [MAGIC, struct.pack("<II", VERSION, len(tensors))]
    for name, tensor in tensors.items():
        tensor = tensor.detach().contiguous().cpu()
        encoded = name.encode("utf-8")
        chunks += [struct.pack("<I", len(encoded)), encoded, struct.pack("<BI", codes[tensor.dtype], tensor.dim()),
                   struct.pack(f"<{tensor.dim()}q", *tensor.shape), tensor.numpy().tobytes()]
    temporary = f"{path}.partial"
    with open(temporary, "wb") as f:
        f.write(b"".join(chunks))
    os.replace(temporary, path)


def compare(name, cpp, ref, failures):
    """Element-wise |cpp - ref| <= atol + RTOL * |ref| with atol = ATOL_FRACTION * max|ref|."""
    if cpp.shape != ref.shape:
        failures.append(f"{name}: shape {tuple(cpp.shape)} != {tuple(ref.shape)}")
        return 0.0
    atol = ATOL_FRACTION * ref.abs().max().item()
    diff = (cpp - ref).abs()
    if not bool((diff <= atol + RTOL * ref.abs()).all()):
        failures.append(f"{name}: max |diff| {diff.max().item():.3e} (atol {atol:.3e}, rtol {RTOL})")
    return diff.max().item()


def check(path):
    state = read_tensor_file(path)
    block_size, vocab_size, n_layer, n_head, n_embd = state["config"].tolist()
    lr, beta1, beta2, eps, weight_decay = state["adamw"].tolist()
    torch.manual_seed(0)
    model = GPT(block_size, vocab_size, n_layer, n_head, n_embd)
    params = dict(model.named_parameters())
    given = {k[len("param/"):]: v for k, v in state.items() if k.startswith("param/")}
    if set(given) != set(params):
        print(f"parameter names differ: only in C++ {sorted(set(given) - set(params))}, "
              f"only in Python {sorted(set(params) - set(given))}")
        return 1
    with torch.no_grad():
        for name, p in params.items():
            p.copy_(given[name])

    x, y = state["x"], state["y"]
    failures = []
    logits, loss = model(x, y)
    loss.backward()
    worst = {"logits": compare("logits", state["cpp/logits"], logits.detach(), failures)}
    worst["loss"] = compare("loss", state["cpp/loss"], loss.detach(), failures)
    worst_grad = 0.0
    for name, p in params.items():
        worst_grad = max(worst_grad, compare("grad " + name, state["cpp/grad/" + name], p.grad, failures))
    model.zero_grad()

    # 10 AdamW steps on the same batch, from the same initial weights (restored above, unchanged by backward).
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, betas=(beta1, beta2), eps=eps, weight_decay=weight_decay)
    losses = []
    for _ in range(len(state["cpp/adamw_losses"])):
        _, loss = model(x, y)
        losses.append(loss.item())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    loss_gaps = [abs(a - b) for a, b in zip(state["cpp/adamw_losses"].tolist(), losses)]
    if max(loss_gaps) > LOSS_ATOL:
        failures.append(f"AdamW losses: max |diff| {max(loss_gaps):.3e} > {LOSS_ATOL}")

    print(f"parity: {len(params)} parameters, batch {tuple(x.shape)}; max |diff|: logits {worst['logits']:.3e}, "
          f"loss {worst['loss']:.3e}, gradients {worst_grad:.3e}, {len(losses)} AdamW losses {max(loss_gaps):.3e}")
    print("  python AdamW losses: " + " ".join(f"{v:.6f}" for v in losses))
    for failure in failures:
        print("  MISMATCH " + failure)
    return 1 if failures else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", metavar="STATE_FILE", required=True, help="tensor file written by the C++ side")
    args = parser.parse_args()
    try:
        return check(args.check)
    except (OSError, ValueError, KeyError) as error:
        print(f"gpt_reference: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
