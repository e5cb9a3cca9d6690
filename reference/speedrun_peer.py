#!/usr/bin/env python3
"""Lab 13's Python peer: the speedrun baseline's recipe in PyTorch eager Python (or under torch.compile),
raced by the lab beside its C++ baseline, one step at a time, in the same run.

    python reference/speedrun_peer.py STATE_FILE WEIGHTS_FILE [--compile]

STATE_FILE is a speedlabs tensor file (reference/gpt_reference.py) that the lab writes:
    "config"  int64: block_size, vocab_size, n_layer, n_head, n_embd, batch, seq, threads, warmup, decay_steps
    "recipe"  float32: lr, min_lr, beta1, beta2, weight_decay, grad_clip
    "train"   int64: the training stream (the validation split is not in it)
    "offsets" int64 (steps, batch): where each step's windows start, drawn by the lab for both sides
    "param/<name>": the initial weights, the C++ baseline's own, so both sides start from the same point

Then the lab speaks to it on standard input, one word a line, and it answers one line each:
    init     -> "peer ready"    builds the model, the optimizer and the loader (the lab times it)
    step     -> "peer stepped"  one optimizer step on the next batch (the lab times it)
    weights  -> "peer weights"  WEIGHTS_FILE written (float32, named as the model's parameters)
    quit, or the end of the input: exits 0
Any failure answers "peer failed: <why>" and exits 1.

The recipe is the baseline's (labs/13_speedrun/src/recipe.cpp): nanoGPT's CPU recipe on the common GPT, the
attention written out, AdamW with weight decay on the matrices only, the gradient's norm clipped, a linear
warm-up then a cosine decay to the floor, and each step's batch B random windows of the stream, as nanoGPT's
get_batch draws them (the lab draws the offsets, so both sides train on the same windows).
"""
import math
import sys
import traceback

import torch

from gpt_reference import GPT, read_tensor_file, write_tensor_file


def learning_rate(step, lr, min_lr, warmup, decay_steps):
    """nanoGPT's get_lr: linear warm-up over `warmup` steps, cosine to min_lr at decay_steps, then min_lr."""
    if step < warmup:
        return lr * (step + 1) / (warmup + 1)
    if step > decay_steps:
        return min_lr
    ratio = (step - warmup) / max(decay_steps - warmup, 1)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - min_lr)


class Peer:
    def __init__(self, state, compiled):
        (self.block, self.vocab, self.n_layer, self.n_head, self.n_embd, self.batch, self.seq, threads,
         self.warmup, self.decay_steps) = (int(v) for v in state["config"])
        self.lr, self.min_lr, self.beta1, self.beta2, self.weight_decay, self.grad_clip = (
            float(v) for v in state["recipe"])
        self.train = state["train"]
        self.offsets = state["offsets"]
        self.initial = {name[len("param/"):]: t for name, t in state.items() if name.startswith("param/")}
        self.compiled = compiled
        torch.set_num_threads(threads)

    def init(self):
        self.model = GPT(self.block, self.vocab, self.n_layer, self.n_head, self.n_embd)
        self.model.load_state_dict(self.initial, strict=False)
        params = dict(self.model.named_parameters())
        missing = set(params) - set(self.initial)
        if missing:
            raise ValueError(f"no initial value for {sorted(missing)}")
        decayed = [p for p in params.values() if p.dim() >= 2]
        kept = [p for p in params.values() if p.dim() < 2]
        self.optimizer = torch.optim.AdamW(
            [{"params": decayed, "weight_decay": self.weight_decay}, {"params": kept, "weight_decay": 0.0}],
            lr=self.lr, betas=(self.beta1, self.beta2), eps=1e-8)
        self.forward = torch.compile(self.model) if self.compiled else self.model
        self.steps = 0

    def next_batch(self):
        starts = self.offsets[self.steps % self.offsets.size(0)].unsqueeze(1) + torch.arange(self.seq + 1)  # (B, T + 1)
        windows = self.train[starts]
        return windows[:, :-1].contiguous(), windows[:, 1:].contiguous()

    def step(self):
        x, y = self.next_batch()
        _, loss = self.forward(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip)
        for group in self.optimizer.param_groups:
            group["lr"] = learning_rate(self.steps, self.lr, self.min_lr, self.warmup, self.decay_steps)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.steps += 1

    def weights(self, path):
        write_tensor_file(path, {name: p.float() for name, p in self.model.named_parameters()})


def main():
    args = [a for a in sys.argv[1:] if a != "--compile"]
    if len(args) != 2:
        print("usage: speedrun_peer.py STATE_FILE WEIGHTS_FILE [--compile]", file=sys.stderr)
        return 2
    state_file, weights_file = args
    try:
        peer = Peer(read_tensor_file(state_file), "--compile" in sys.argv[1:])
        for line in sys.stdin:
            command = line.strip()
            if command == "init":
                peer.init()
                answer = "peer ready"
            elif command == "step":
                peer.step()
                answer = "peer stepped"
            elif command == "weights":
                peer.weights(weights_file)
                answer = "peer weights"
            elif command == "quit":
                return 0
            else:
                raise ValueError(f"unknown command {command!r}")
            print(answer, flush=True)
    except Exception as error:  # the lab shows the reason and races on without this peer
        traceback.print_exc(file=sys.stdout)
        print(f"peer failed: {type(error).__name__}: {error}".replace("\n", " "), flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
