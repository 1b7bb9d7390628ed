"""Peak extra memory of naive vs tiled attention, one head, d_head 64, float32, CPU.

    .venv/bin/python benchmarks/tiled_attention_memory.py [--ns 512 1024 ...] [--plot out.png]

"Extra" means beyond the inputs q, k, v and the output: the working memory of the method.

Method (two independent measurements per point):
1. Tensor tracker (the main figure): course_lib.profiling.measure_peak_extra_memory runs the
   function under a TorchDispatchMode that sees every aten op, records each newly allocated
   tensor storage, and notices its free through a weak reference; the peak of live bytes, leaving
   out the output's storage, is the extra memory.  Exact and repeatable, but blind to scratch
   memory inside a kernel.  (tracemalloc cannot be used: torch allocates in C++.)
2. RSS check: a fresh Python process per (method, n) makes the inputs, warms the kernels up on
   n = 64, resets its peak resident set to the current one (Linux: "5" > /proc/self/clear_refs),
   runs the method once and reads the peak (VmHWM in /proc/self/status); the rise minus the
   output's bytes is the extra.  (getrusage's ru_maxrss would not do: it keeps the high-water
   mark of the parent process the child was forked from.)  It sees every byte the process
   touched, kernel scratch included, but only to the page and after the allocator's reuse of
   freed memory, so small figures (the tiled ones) are noise and may read 0.
On the machine in benchmarks/README.md the two agree within 0.3% for naive attention (n >= 1,024):
the tracker misses nothing large.
"""
from __future__ import annotations

import argparse
import math
import platform
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from course_lib.profiling import attention_memory_vs_n, plot_memory_vs_n  # noqa: E402
from course_lib.tiled_attention import tiled_attention  # noqa: E402

D_HEAD = 64
BLOCK = 128  # block_q = block_k (tiled_attention's default)


def naive_attention(q, k, v):
    """softmax(q kᵀ / sqrt(d_head)) v with the whole (n, n) score matrix."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (1, 1, n, n)
    return torch.softmax(scores, dim=-1) @ v                   # (1, 1, n, d_head)


def tiled(q, k, v):
    return tiled_attention(q, k, v, block_q=BLOCK, block_k=BLOCK)


METHODS = {"naive": naive_attention, "tiled": tiled}


def rss_child(method: str, n: int) -> None:
    """Run in a fresh process: print the rise of peak RSS (bytes) minus the output, and seconds."""
    torch.set_num_threads(1)
    fn = METHODS[method]
    small = torch.randn(3, 1, 1, 64, D_HEAD)
    fn(*small)  # load and initialise the kernels before measuring
    q, k, v = torch.randn(3, 1, 1, n, D_HEAD)
    Path("/proc/self/clear_refs").write_text("5")  # peak RSS := current RSS
    before = proc_status_bytes("VmRSS")
    start = time.perf_counter()
    out = fn(q, k, v)
    seconds = time.perf_counter() - start
    after = proc_status_bytes("VmHWM")  # the peak since the reset
    print(max(0, after - before - out.numel() * out.element_size()), seconds)


def proc_status_bytes(field: str) -> int:
    """A memory field of /proc/self/status (given there in kB, meaning KiB), in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/self/status (the RSS check needs Linux)")


def rss_point(method: str, n: int) -> tuple[int, float]:
    res = subprocess.run([sys.executable, __file__, "--child", method, str(n)],
                         capture_output=True, text=True, check=True)
    extra, seconds = res.stdout.split()
    return int(extra), float(seconds)


def mib(nbytes: float) -> str:
    return f"{nbytes / 2**20:,.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ns", type=int, nargs="+", default=[512, 1024, 2048, 4096, 8192])
    parser.add_argument("--no-rss", action="store_true", help="skip the RSS check")
    parser.add_argument("--plot", type=Path, help="save the log-log plot as this PNG")
    parser.add_argument("--child", nargs=2, metavar=("METHOD", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        rss_child(args.child[0], int(args.child[1]))
        return

    torch.set_num_threads(1)  # tiles are small; on a shared 2-core machine one thread is steadier
    print(f"# {platform.node()}: {platform.processor() or platform.machine()}, "
          f"{torch.get_num_threads()} torch thread, torch {torch.__version__}, "
          f"d_head {D_HEAD}, one head, float32, tiled blocks {BLOCK} x {BLOCK}")
    print(__doc__.split("Method")[1].split("\n", 1)[1].rstrip())
    print()
    rows = attention_memory_vs_n(METHODS, args.ns, d_head=D_HEAD)
    header = "| n | naive extra (MiB) | tiled extra (MiB) | tiled / naive |"
    rule = "|---:|---:|---:|---:|"
    if not args.no_rss:
        header += " naive RSS check (MiB) | tiled RSS check (MiB) | naive s | tiled s |"
        rule += "---:|---:|---:|---:|"
    print(header)
    print(rule)
    for row in rows:
        line = (f"| {row['n']:,} | {mib(row['naive'])} | {mib(row['tiled'])} | "
                f"1/{row['naive'] / row['tiled']:,.0f} |")
        if not args.no_rss:
            (naive_rss, naive_s), (tiled_rss, tiled_s) = (rss_point(m, row["n"]) for m in METHODS)
            line += f" {mib(naive_rss)} | {mib(tiled_rss)} | {naive_s:.2f} | {tiled_s:.2f} |"
        print(line, flush=True)
    last = rows[-1]
    ratio = last["tiled"] / last["naive"]
    print(f"\nAt n = {last['n']:,}: tiled / naive = {ratio:.5f} "
          f"({'under' if ratio < 1 / 20 else 'NOT under'} the bar of 1/20).")
    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        ax = plot_memory_vs_n(rows)
        ax.figure.tight_layout()
        ax.figure.savefig(args.plot, dpi=120)
        print(f"plot saved to {args.plot}")


if __name__ == "__main__":
    main()
