"""A Llama-style MLP block whose three matmuls are tiledsl kernels, against the same block
in plain torch: checked, then timed with CUDA events (calls queued back to back), eager
and under torch.compile.

    python3 examples/python/mlp.py [--tokens 2048] [--hidden 4096] [--intermediate 11008]

    y = down( silu(x @ W_gate.T) * (x @ W_up.T) )

The weights are kept as torch keeps a Linear's (out_features x in_features). The gate and
up projections are one product against their weights stacked (2·intermediate x hidden:
22016 x 4096 for Llama-2-7B), the down projection a second; both are tiledsl kernels
loaded from a `.tile` file and registered as a torch operator (tiledsl.torch.register), so
torch.compile keeps the whole block in one graph. On a Hopper GPU both run
examples/tuned/llama2_7b.tuned.tile: one file of the kernels that were fastest at each of
Llama-2-7B's 36 shapes (1 to 8192 tokens), with B declared as the weight's transpose
(`op(x, W.t())`, no copy) and a dispatch table that picks the kernel at each call's
shape, so any `--tokens` runs the kernel tuned nearest to it (tiledsl.TileWarning says
when a shape is far from all of them); elsewhere both run examples/main.tile (the best
schedule the GPU can run), whose B is K x N row-major: the weights are transposed once,
when the block is built.

The check: the block in float64 from the same f16 weights is the reference; tiledsl's
largest error against it must be within twice torch's own (the same f16 roundings, in
another order of summation).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

import tiledsl
import tiledsl.torch

EXAMPLES = Path(__file__).resolve().parent.parent


def kernel_for_this_gpu() -> tuple[Path, bool]:
    """The .tile file of both products, and whether it takes the weights as torch keeps
    them (B declared col: `op(x, W.t())`)."""
    major, _ = torch.cuda.get_device_capability()
    if major == 9:
        return EXAMPLES / "tuned" / "llama2_7b.tuned.tile", True
    return EXAMPLES / "main.tile", False


class TorchMLP(torch.nn.Module):
    def __init__(self, w_gate_up: torch.Tensor, w_down: torch.Tensor):
        super().__init__()
        self.w_gate_up, self.w_down = w_gate_up, w_down

    def matmul(self, x, w, which):
        return x @ w.t()

    def forward(self, x):
        gate, up = self.matmul(x, self.w_gate_up, "gate_up").chunk(2, dim=-1)
        return self.matmul(torch.nn.functional.silu(gate) * up, self.w_down, "down")


class TiledslMLP(TorchMLP):
    """The same block, its matmuls tiledsl operators."""

    def __init__(self, w_gate_up, w_down):
        super().__init__(w_gate_up, w_down)
        file, linear_layout = kernel_for_this_gpu()
        self.op = tiledsl.torch.register(file, "mlp_linear")
        # B as the kernel declares it: the weight's transpose as a view (col), or once
        # transposed into K x N rows (row)
        self.b = {
            which: w.t() if linear_layout else w.t().contiguous()
            for which, w in (("gate_up", w_gate_up), ("down", w_down))
        }

    def matmul(self, x, w, which):
        # the chunk of a product's columns is a strided view; silu * up makes it dense
        return self.op(x.contiguous(), self.b[which])


#: Rounds of every timing, in turn.
ROUNDS = 3


def time_ms(fn, x, iterations: int) -> float:
    """The time of one call in milliseconds: `iterations` calls queued back to back between
    two CUDA events, as a program's layers run (the host's launch of a call overlaps the
    GPU's work on the one before; a lone call would time the host's launch too)."""
    for _ in range(3):
        fn(x)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iterations):
        fn(x)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / iterations


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", type=int, default=2048)
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--intermediate", type=int, default=11008)
    p.add_argument("--iterations", type=int, default=50)
    p.add_argument("--json", default=None, help="also write the numbers here")
    p.add_argument(
        "--mode",
        default="default",
        choices=("default", "reduce-overhead"),
        help="torch.compile's mode; reduce-overhead replays the block as a CUDA graph, "
        "which takes the host's cost of each call out (at a few tokens the calls cost the "
        "host about what they cost the GPU)",
    )
    args = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("this example runs on a CUDA GPU (torch.cuda.is_available() is False)")

    torch.manual_seed(0)
    t, h, i = args.tokens, args.hidden, args.intermediate
    x = (torch.randn(t, h, device="cuda") * 0.5).half()
    w_gate_up = (torch.randn(2 * i, h, device="cuda") / h**0.5).half()  # as nn.Linear keeps it
    w_down = (torch.randn(h, i, device="cuda") / i**0.5).half()
    blocks = {"torch": TorchMLP(w_gate_up, w_down), "tiledsl": TiledslMLP(w_gate_up, w_down)}

    reference = TorchMLP(w_gate_up.double(), w_down.double())(x.double())
    errors = {
        name: (block(x).double() - reference).abs().max().item() for name, block in blocks.items()
    }
    ok = errors["tiledsl"] <= 2 * errors["torch"] + 1e-6
    print(
        f"MLP block, {t} tokens, hidden {h}, intermediate {i}, f16 ({torch.cuda.get_device_name()})"
    )
    print(
        f"check: largest error against float64: tiledsl {errors['tiledsl']:.3g}, "
        f"torch {errors['torch']:.3g} -> {'PASS' if ok else 'FAIL'}"
    )
    flops = 2 * t * h * 2 * i + 2 * t * i * h
    runs = {}
    for name, block in blocks.items():
        runs[f"{name}, eager"] = (block, x)
        runs[f"{name}, torch.compile"] = (
            torch.compile(block, fullgraph=True, mode=args.mode),
            x,
        )
    # the products alone, each block's own: where the time goes
    act = torch.nn.functional.silu(x @ w_gate_up[:i].t()) * (x @ w_gate_up[i:].t())
    for name, block in blocks.items():
        runs[f"{name}: gate/up product"] = (
            lambda x, b=block: b.matmul(x, b.w_gate_up, "gate_up"),
            x,
        )
        runs[f"{name}: down product"] = (lambda a, b=block: b.matmul(a, b.w_down, "down"), act)
    # rounds in turn, the best of each kept: no configuration gains from its place
    results: dict[str, float] = {}
    for _ in range(ROUNDS):
        for label, (fn, arg) in runs.items():
            ms = time_ms(fn, arg, args.iterations)
            results[label] = min(results.get(label, ms), ms)
    print(f"{'(per call, best of 3 rounds)':<36}{'ms':>9}{'TFLOP/s':>10}{'x torch':>9}")
    for label, ms in results.items():
        work = {"gate/up product": 2 * t * h * 2 * i, "down product": 2 * t * i * h}
        flop = work.get(label.split(":")[-1].strip(), flops)
        torch_ms = results[label.replace("tiledsl", "torch")]
        print(f"{label:<36}{ms:9.3f}{flop / ms / 1e9:10.1f}{torch_ms / ms:9.3f}")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "device": torch.cuda.get_device_name(),
                    "shape": {"tokens": t, "hidden": h, "intermediate": i},
                    "compile_mode": args.mode,
                    "kernels": str(kernel_for_this_gpu()[0].relative_to(EXAMPLES.parent)),
                    "max_error_vs_f64": errors,
                    "check": "PASS" if ok else "FAIL",
                    "ms_per_call": results,
                },
                indent=2,
            )
            + "\n"
        )
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
