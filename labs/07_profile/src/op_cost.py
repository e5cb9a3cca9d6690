"""The host cost of one op in Python eager, the peer of lab 07's C++ measurement (labs/07_profile/src/op_cost.cpp).

Same ops, shapes, device, intra-op threads, warm-up and repeats; prints one JSON line:
{"add_us": ..., "linear_us": ..., "torch": "..."} (microseconds per call, the median repeat).
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F


def us_per_call(op, device, calls, repeats, warmup):
    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    samples = []
    for i in range(warmup + repeats):
        sync()
        start = time.perf_counter()
        for _ in range(calls):
            op()
        sync()
        if i >= warmup:
            samples.append((time.perf_counter() - start) * 1e6 / calls)
    return statistics.median(samples)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--linear-rows", type=int, default=8)
    parser.add_argument("--linear-width", type=int, default=64)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    a = torch.ones(1, device=device)
    x = torch.randn(args.linear_rows, args.linear_width, device=device)
    w = torch.randn(args.linear_width, args.linear_width, device=device)
    b = torch.randn(args.linear_width, device=device)
    timing = (device, args.calls, args.repeats, args.warmup)
    result = {
        "add_us": us_per_call(lambda: a + a, *timing),
        "linear_us": us_per_call(lambda: F.linear(x, w, b), *timing),
        "torch": torch.__version__,
    }
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
