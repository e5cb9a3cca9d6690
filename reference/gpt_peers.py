#!/usr/bin/env python3
"""The Python peers of lab 06's speed ladder: the reference GPT-2 (gpt_reference.py) trained with the
chapter's loop, eagerly and under torch.compile, on the weights and batches the C++ lab used.

    python reference/gpt_peers.py --state STATE_FILE --device cuda --modes fp32,tf32,bf16 \
        --warmup 5 --steps 20 [--compile-modes bf16]

prints one JSON object on stdout: {"torch", "device", "peers": [{"name", "ran", "reason", "first_step_ms",
"median_ms", "tokens_per_s", "peak_bytes", "losses", "step_ms"}, ...]}, one peer per mode, then one per --compile-modes mode under torch.compile.
Exit 0 on success, 2 on bad arguments or a malformed state file.

The state file (speedlabs tensor format, see gpt_reference.py) holds "config" (int64: block_size,
vocab_size, n_layer, n_head, n_embd), "adamw" (float32: lr, beta1, beta2, eps, weight_decay),
"param/<name>" (the initial weights) and "x", "y" (int64, steps x B x T: one batch per step).

Each step is timed like the C++ side times it: the device is synchronized before and after the step
(zero_grad, forward under the mode's autocast, backward, AdamW step), so the time covers the work
itself, not its queuing. Step times after the warm-up give the median; the first step is reported
apart (for torch.compile it includes the compilation).
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt_reference import GPT, read_tensor_file  # noqa: E402  (the model the parity test checks)

MODES = ("fp32", "tf32", "bf16")


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_peer(state, device, mode, compiled, warmup, steps):
    block_size, vocab_size, n_layer, n_head, n_embd = state["config"].tolist()
    lr, beta1, beta2, eps, weight_decay = state["adamw"].tolist()
    model = GPT(block_size, vocab_size, n_layer, n_head, n_embd).to(device)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(state["param/" + name])
    # foreach=True is the default for CUDA parameters; on the CPU the default is a per-tensor loop, so
    # it is set here to keep the C++ ladder's ForeachAdamW and this peer on the same algorithm everywhere.
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, betas=(beta1, beta2), eps=eps,
                                  weight_decay=weight_decay, foreach=True)
    forward = torch.compile(model) if compiled else model
    torch.set_float32_matmul_precision("high" if mode == "tf32" else "highest")
    xs, ys = state["x"].to(device), state["y"].to(device)
    total = warmup + steps
    if xs.size(0) < total:
        raise ValueError(f"the state file has {xs.size(0)} batches, {total} steps were asked for")
    losses = torch.zeros(total, device=device)
    times_ms = []
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    for step in range(total):
        synchronize(device)
        start = time.perf_counter()
        optimizer.zero_grad()
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=(mode == "bf16")):
            _, loss = forward(xs[step], ys[step])
        loss.backward()
        optimizer.step()
        losses[step] = loss.detach()
        synchronize(device)
        times_ms.append((time.perf_counter() - start) * 1e3)
    torch.set_float32_matmul_precision("highest")
    median_ms = statistics.median(times_ms[warmup:])
    tokens = xs.size(1) * xs.size(2)
    return {"name": f"python_{'compile' if compiled else 'eager'}_{mode}", "ran": True, "reason": "",
            "first_step_ms": times_ms[0], "median_ms": median_ms, "tokens_per_s": tokens / (median_ms / 1e3),
            "peak_bytes": torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None,
            "losses": losses.cpu().tolist(), "step_ms": times_ms[warmup:]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state", required=True, help="tensor file written by lab 06")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--modes", default="fp32,tf32,bf16", help="comma-separated eager modes: fp32, tf32, bf16")
    parser.add_argument("--warmup", type=int, default=5, help="steps before the measured ones")
    parser.add_argument("--steps", type=int, default=20, help="measured steps")
    parser.add_argument("--compile-modes", default="", help="comma-separated modes to run again under torch.compile")
    parser.add_argument("--out", help="write the JSON result to this file (default: print it)")
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    compile_modes = [m for m in args.compile_modes.split(",") if m]
    bad = [m for m in modes + compile_modes if m not in MODES]
    if bad or not (modes or compile_modes) or args.warmup < 0 or args.steps < 1:
        print(f"gpt_peers: modes must be among {', '.join(MODES)} (got --modes {args.modes!r}, --compile-modes "
              f"{args.compile_modes!r}), warmup >= 0, steps >= 1", file=sys.stderr)
        return 2
    try:
        device = torch.device(args.device)
        if device.type == "cuda" and not torch.cuda.is_available():
            print("gpt_peers: --device cuda, but this torch sees no CUDA GPU", file=sys.stderr)
            return 2
        state = read_tensor_file(args.state)
        peers = [run_peer(state, device, mode, False, args.warmup, args.steps) for mode in modes]
        peers += [run_peer(state, device, mode, True, args.warmup, args.steps) for mode in compile_modes]
    except (OSError, ValueError, KeyError, RuntimeError) as error:
        print(f"gpt_peers: {error}", file=sys.stderr)
        return 2
    result = json.dumps({"torch": torch.__version__, "device": str(device), "peers": peers})
    if args.out:
        temporary = args.out + ".tmp"  # written whole, then moved into place
        with open(temporary, "w") as out:
            out.write(result + "\n")
        os.replace(temporary, args.out)
    else:
        print(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
