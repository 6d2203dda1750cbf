"""Measure on one GPU what the step model otherwise takes from published numbers.

Run it on the GPU the plan will use (CUDA; ``--device cpu`` only checks that it runs)::

    python labs_src/demos/calibrate_gpu.py --model llama3-8b --seq-len 8192 \\
        --tp 1 --cp 1 --out calibration.json

It measures, with CUDA events, the median of ``--repeats`` timed runs after warm-up:

- every weight GEMM the plan gives one GPU for a layer
  (:func:`infralens.layer_gemms.layer_gemms`), forward, dgrad and wgrad, in BF16 and,
  where the GPU has FP8 tensor cores, in FP8 (``torch._scaled_mm``, per-tensor scales);
- a large square BF16 GEMM, the reference the published matmul ceilings use;
- causal attention forward and forward plus backward
  (``scaled_dot_product_attention``), at the plan's heads per GPU and tokens per CP rank;
- one GEMM alone and beside a second stream moving a TP all-gather's bytes: an NCCL
  all-gather when launched under torchrun on two or more GPUs, otherwise a
  device-to-device copy of the same bytes, which shares HBM and SMs as NCCL's kernels do
  but crosses no link;
- with ``--sustain S``, a square BF16 GEMM stream held for S seconds, its rate with
  the SM clock and board power window by window;
- the loss, PyTorch's ``cross_entropy`` on the plan's fp32 logits (tokens per
  CP rank by the vocabulary over TP), forward and backward, and a device-to-device
  copy as large: the HBM bandwidth each reaches, the loss's counted from
  :data:`infralens.elementwise.LOSS_BYTES`, against the datasheet's;
- the time between back-to-back launches of an empty kernel: the CPU launch gap a
  step without CUDA graphs pays per kernel.

The JSON it writes is read by :func:`infralens.sustained.from_file`: the plan's GEMM
rates replace the published ceilings and the launch gap replaces the fitted
per-kernel time; ``python -m infralens plan --calibration FILE`` and
``Job(sustained=...)`` use it. GPU name, driver, CUDA and torch versions go in the file.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from infralens.elementwise import LOSS_BYTES
from infralens.layer_gemms import layer_gemms, passes
from infralens.model import model_from


def timed(
    fn: Callable[[], object],
    repeats: int,
    device: torch.device,
    graph: bool = False,
) -> float:
    """Median seconds of one *fn* over *repeats* timings after three warm-ups.

    With *graph* on CUDA, ten calls are captured in one CUDA graph and replayed, so the
    time is the GPU's alone, with no launch gap between kernels.
    """
    for _ in range(3):
        fn()
    calls = 1
    run: Callable[[], object] = fn
    if graph and device.type == "cuda":
        calls = 10
        g = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            fn()  # warm-up on the capture stream, as CUDA graphs require
        torch.cuda.current_stream(device).wait_stream(side)
        with torch.cuda.graph(g):
            for _ in range(calls):
                fn()
        run = g.replay
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            run()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3 / calls)
        else:
            t = time.perf_counter()
            run()
            times.append(time.perf_counter() - t)
    return statistics.median(times)


def gemm_fn(
    m: int, n: int, k: int, fp8: bool, device: torch.device
) -> Callable[[], object]:
    """A closure running one m × n × k GEMM in BF16, or FP8 with a BF16 output."""
    a = torch.randn(m, k, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, k, device=device, dtype=torch.bfloat16)
    if not fp8:
        return lambda: a @ b.t()
    a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
    one = torch.ones((), device=device)
    return lambda: torch._scaled_mm(
        a8, b8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16
    )


def smi(fields: str) -> str:
    """nvidia-smi's reading of *fields* (comma-separated query names), or "unknown"."""
    try:
        return subprocess.run(
            ["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def versions(device: torch.device) -> dict[str, str]:
    """GPU, driver, CUDA and torch versions as the measurement saw them."""
    out = {"torch": torch.__version__, "cuda": str(torch.version.cuda)}
    if device.type == "cuda":
        out["gpu"] = torch.cuda.get_device_name(device)
        out["sms"] = str(
            torch.cuda.get_device_properties(device).multi_processor_count
        )
        out["driver"] = smi("driver_version,power.limit,clocks.max.sm")
    else:
        out["gpu"] = "cpu"
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--model",
        default="llama3-8b",
        help="a preset name or a shape, as rank --model takes",
    )
    p.add_argument("--seq-len", type=int, default=8192)
    p.add_argument("--micro-batch", type=int, default=1)
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--cp", type=int, default=1)
    p.add_argument(
        "--gpu-preset",
        default="h100-sxm5-80gb",
        help="the infralens GPU preset these numbers stand for",
    )
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--device", default="cuda")
    p.add_argument("--no-fp8", action="store_true")
    p.add_argument(
        "--sustain",
        type=float,
        default=0.0,
        help="seconds of square GEMMs to watch the rate and clocks settle",
    )
    p.add_argument("--out", default="calibration.json")
    args = p.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.stderr.write(
            "no CUDA device: pass --device cpu to check the script only\n"
        )
        return 2
    model = model_from(args.model, args.seq_len)
    tokens = args.micro_batch * args.seq_len
    fp8_ok = (not args.no_fp8 and device.type == "cuda"
              and torch.cuda.get_device_capability(device) >= (8, 9))  # fmt: skip
    r = args.repeats
    result: dict[str, Any] = {
        "versions": versions(device),
        "gpu_preset": args.gpu_preset,
        "plan": {"model": args.model, "seq_len": args.seq_len, "micro_batch": args.micro_batch,
                 "tp": args.tp, "cp": args.cp},
    }  # fmt: skip

    # The plan's GEMMs, three passes each, BF16 then FP8.
    rows = []
    totals = {"bf16": [0, 0.0], "fp8": [0, 0.0]}
    for g in layer_gemms(model, tokens=tokens, tp=args.tp, cp=args.cp):
        for pss in passes(g):
            row: dict[str, Any] = {
                "gemm": pss.name,
                "m": pss.m,
                "n": pss.n,
                "k": pss.k,
            }
            for prec in ("bf16", "fp8") if fp8_ok else ("bf16",):
                call = gemm_fn(pss.m, pss.n, pss.k, prec == "fp8", device)
                s = timed(call, r, device, graph=True)
                row[prec + "_seconds"] = s
                row[prec + "_eager_seconds"] = timed(call, r, device)
                totals[prec][0] += pss.flops
                totals[prec][1] += s
            rows.append(row)
    result["gemms"] = rows
    result["plan_gemm_flops_per_s"] = {
        k: v[0] / v[1] for k, v in totals.items() if v[1] > 0
    }
    big = 8192 if device.type == "cuda" else 256
    result["square_gemm"] = {
        "size": big,
        "bf16_flops_per_s": 2
        * big**3
        / timed(gemm_fn(big, big, big, False, device), r, device, graph=True),
    }
    if fp8_ok:
        result["square_gemm"]["fp8_flops_per_s"] = (
            2
            * big**3
            / timed(gemm_fn(big, big, big, True, device), r, device, graph=True)
        )

    # Attention at the plan's heads per GPU and tokens per CP rank.
    heads, kv, d = (
        model.heads // args.tp,
        max(model.kv_heads // args.tp, 1),
        model.head_dim,
    )
    s_loc = args.seq_len // args.cp

    def qkv(h: int) -> torch.Tensor:
        return torch.randn(args.micro_batch, h, s_loc, d, device=device, dtype=torch.bfloat16,
                           requires_grad=True)  # fmt: skip

    q, k_, v = qkv(heads), qkv(kv), qkv(kv)
    gqa = heads != kv
    grad = torch.randn(
        args.micro_batch, heads, s_loc, d, device=device, dtype=torch.bfloat16
    )

    def fwd() -> torch.Tensor:
        return F.scaled_dot_product_attention(
            q, k_, v, is_causal=True, enable_gqa=gqa
        )

    def both() -> None:
        fwd().backward(grad)

    causal_flops = (
        2 * 2 * args.micro_batch * heads * s_loc * s_loc * d / 2
    )  # QKᵀ and PV, half
    tf, tb = timed(fwd, r, device), timed(both, r, device)
    result["attention"] = {
        "heads": heads, "kv_heads": kv, "tokens": s_loc,
        "forward_seconds": tf, "forward_backward_seconds": tb,
        "forward_flops_per_s": causal_flops / tf,
        "backward_flops_per_s": 2.5 * causal_flops / max(tb - tf, 1e-9),
    }  # fmt: skip

    # One GEMM alone and beside a TP all-gather's bytes moving on a second stream for
    # as long as the GEMM runs; the GEMM is timed on its own stream.
    g = layer_gemms(model, tokens=tokens, tp=args.tp, cp=args.cp)[2]
    run = gemm_fn(g.m, g.n, g.k, False, device)
    gather_bytes = tokens // args.cp * model.hidden * 2
    alone = timed(run, r, device)
    src = torch.empty(gather_bytes // 2, device=device, dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1:
        import torch.distributed as dist

        dist.init_process_group("nccl")
        part = torch.empty(
            gather_bytes // 2 // world, device=device, dtype=torch.bfloat16
        )

        def move() -> None:
            dist.all_gather_into_tensor(src, part)

        how = f"NCCL all-gather over {world} GPUs"
    else:

        def move() -> None:
            dst.copy_(src)

        how = "device-to-device copy of the all-gather's bytes (one GPU: no link crossed)"
    moved = timed(move, r, device)
    copies = max(1, round(alone / moved))
    beside_times = []
    if device.type == "cuda":
        side = torch.cuda.Stream(device)
        for _ in range(r):
            side.wait_stream(torch.cuda.current_stream(device))
            with torch.cuda.stream(side):
                for _ in range(copies + 1):
                    move()
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            run()
            end.record()
            torch.cuda.current_stream(device).wait_stream(side)
            end.synchronize()
            beside_times.append(start.elapsed_time(end) / 1e3)
    together = statistics.median(beside_times) if beside_times else alone
    result["overlap"] = {
        "gemm": [g.m, g.n, g.k], "bytes": gather_bytes, "how": how,
        "gemm_alone_seconds": alone, "move_alone_seconds": moved,
        "moves_beside": copies + 1, "gemm_beside_seconds": together,
        "gemm_slowdown": together / alone,
    }  # fmt: skip

    # A square BF16 GEMM stream held for --sustain seconds: its rate and the SM clock
    # and board power, window by window, as the board settles under load.
    if device.type == "cuda" and args.sustain > 0:
        run = gemm_fn(big, big, big, False, device)
        windows = []
        t_end = time.perf_counter() + args.sustain
        while time.perf_counter() < t_end:
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(50):
                run()
            end.record()
            end.synchronize()
            rate = 50 * 2 * big**3 / (start.elapsed_time(end) / 1e3)
            windows.append(
                {"flops_per_s": rate, "smi": smi("clocks.sm,power.draw")}
            )
        result["sustained_square_gemm"] = windows

    # The loss on this GPU's logits, and a copy of as many bytes: the HBM
    # bandwidth a memory-bound pass reaches (the model prices both at the
    # datasheet's).
    n_rows, vocab = tokens // args.cp, -(-model.vocab_size // args.tp)
    logits = torch.randn(n_rows, vocab, device=device, dtype=torch.bfloat16,
                         requires_grad=True)  # fmt: skip
    target = torch.randint(0, vocab, (n_rows,), device=device)

    def loss() -> None:  # one GPU's slice, run as PyTorch's eager loss runs it
        F.cross_entropy(logits.float(), target).backward()

    t_loss = timed(loss, r, device)
    big_src = torch.empty(n_rows * vocab * 2, device=device, dtype=torch.bfloat16)
    big_dst = torch.empty_like(big_src)
    t_copy = timed(lambda: big_dst.copy_(big_src), r, device)
    result["loss"] = {
        "logits": [n_rows, vocab], "seconds": t_loss,
        "counted_bytes": LOSS_BYTES["eager"],
        "bytes_per_s": LOSS_BYTES["eager"] * n_rows * vocab / t_loss,
        "copy_bytes_per_s": 2 * big_src.numel() * 2 / t_copy,
    }  # fmt: skip

    # Back-to-back launches of an empty kernel: the launch gap without CUDA graphs.
    x = torch.zeros(1, device=device)
    n = 2000

    def launches() -> None:
        for _ in range(n):
            x.add_(1)

    result["launch_seconds"] = timed(launches, max(r // 4, 3), device) / n

    with open(args.out, "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=1, sort_keys=True)
        fh.write("\n")
    bf = result["plan_gemm_flops_per_s"]["bf16"] / 1e12
    print(f"{result['versions']['gpu']}: plan GEMMs {bf:.0f} TFLOP/s BF16, square "
          f"{result['square_gemm']['bf16_flops_per_s'] / 1e12:.0f}, attention fwd "
          f"{result['attention']['forward_flops_per_s'] / 1e12:.0f} TFLOP/s, launch gap "
          f"{result['launch_seconds'] * 1e6:.1f} us -> {args.out}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
