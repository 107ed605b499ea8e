# ruff: noqa: E501  (the embedded CUDA keeps its own line lengths)
"""Probe (not part of tiledsl): what do the epilogue and the clock cost a cooperative Hopper
kernel at the shapes where it ties cuBLAS? Edits the CUDA that tiledsl emits for a rung
(examples/hopper/epilogue.tile by default), then runs each variant through tiledsl's own
launcher, oracles and timing loop beside cuBLAS, and samples the SM clock and the board
power (NVML) while each one runs for a while.

    python3 docs/probes/epilogue_probe.py [--tile FILE] [--rounds 4] [--data ints normal]
                                          SIZE ...

Variants:
- `emitted`: the kernel as tiledsl emits it (two 128-column pieces per warpgroup, one
  staging tile each, `cp.async.bulk.wait_group.read 0` before the second piece);
- `store64x2`: four 64-column pieces into two halves of the same staging tile,
  `wait_group.read 1` (only the store of the piece two back must have read its half):
  the same shared memory, the stores overlapped with the next piece's stmatrix;
- `no-wait` (wrong on purpose: C may be torn): the emitted epilogue without the wait
  between pieces, what the store's wait costs at most;
- `no-C` (wrong on purpose: C is not written): the epilogue left out (the accumulators
  summed into a sink that keeps their wgmmas), what the whole epilogue costs at most.
The wrong ones are timed without the oracles; the others pass both before they count.

With `--sustain S` (off by default), each kernel (and cuBLAS) is also launched back to back
for S seconds in the first round, NVML read every 10 ms: the mean SM clock and board power
past the first 100 ms. Its first run (2026-12-04) showed why it is off: NVML's power lags
(the first kernel after an idle spell read 261 W, the same kernel later ~600 W), and the
sustained load heats the card, so every timing after it moved by up to 15 %.
"""

import argparse
import threading
import time
from pathlib import Path

import cupy as cp
import numpy as np

import tiledsl.driver as driver
from tiledsl.commands.run import Report, check_size, gpu_checks, kernel_calls
from tiledsl.gpu import runtime
from tiledsl.gpu.baselines import cublas
from tiledsl.gpu.timing import CudaClock, rotated_sets, time_calls


def must(src: str, old: str, new: str, count: int = 1) -> str:
    assert src.count(old) == count, (old[:80], src.count(old))
    return src.replace(old, new)


IN_LOOP_WAIT = "                if (lane == 0) tma_store_wait_read();  // the TMA store of the piece before has read Cs[warp]\n"
EPILOGUE_START = "            // C leaves by TMA, 128 columns of the warpgroup's at a time\n"
EPILOGUE_END = "        }\n        if (lane == 0) tma_store_wait_read();  // the TMA stores have read Cs before the block exits"

WAIT_ONE = r'''
// Until at most one of this thread's bulk groups is still reading shared memory.
__device__ __forceinline__ void tma_store_wait_read_1() {
    asm volatile("cp.async.bulk.wait_group.read 1;\n" ::: "memory");
}
'''

STORE64X2 = """            // C leaves by TMA, 64 columns of the warpgroup's at a time, into alternate halves of Cs[warp]
            #pragma unroll
            for (int h = 0; h < MMA_N / 64; ++h) {
                if (lane == 0) tma_store_wait_read_1();  // the store of piece h - 2 has read this half of Cs[warp]
                warpgroup_barrier(1 + warp);  // WAR: the half is free again for every lane
                {
                    float (&d)[128] = acc[0][0];
                    const int sr = wq * 16 + lane % 32 / 8 % 2 * 8 + lane % 8, sc = lane % 32 / 16 * 8;
                    #pragma unroll
                    for (int j = 0; j < 4; ++j) {
                        const int n8 = h * 8 + 2 * j;
                        stmatrix_x4(&Cs[warp][h % 2][sr][xor_swizzle<CS_XOR_CHUNK, CS_XOR_GROUPS, CS_XOR_REPEAT>(sr, 16 * j + sc)], pack_f16x2(d[n8 * 4 + 0], d[n8 * 4 + 1]), pack_f16x2(d[n8 * 4 + 2], d[n8 * 4 + 3]), pack_f16x2(d[n8 * 4 + 4], d[n8 * 4 + 5]), pack_f16x2(d[n8 * 4 + 6], d[n8 * 4 + 7]));
                    }
                }
                fence_proxy_async();  // the lanes' writes to Cs, visible to the TMA unit's reads
                warpgroup_barrier(1 + warp);  // RAW: every lane's part of the piece is in Cs
                if (lane == 0) {
                    tma_store_2d(&map_C, &Cs[warp][h % 2][0][0], bn * BN + wn * MMA_N + h * 64, bm * BM + wm * MMA_M);
                    tma_store_commit();
                }
            }
"""


def epilogue_span(src: str) -> tuple[int, int]:
    start = src.index(EPILOGUE_START)
    end = src.index(EPILOGUE_END, start)
    return start, end


def store64x2(src: str) -> str:
    src = must(src, "// Four 8x8 tiles of 16-bit elements", WAIT_ONE + "// Four 8x8 tiles of 16-bit elements")
    start, end = epilogue_span(src)
    return src[:start] + STORE64X2 + src[end:]


def no_wait(src: str) -> str:
    return must(src, IN_LOOP_WAIT, "")


# What replaces the epilogue in `no-C`: ptxas removes the wgmmas of accumulators that
# nothing reads (the first run of this probe, 2026-12-04, timed such a kernel: one dummy
# HGMMA left in its SASS, 1,258-1,375 "TFLOP/s"), so a sum of them is written where no
# input makes it land.
SINK = """            {  // the probe's sink: every accumulator read, C written only if the sum is 12345.678
                float sum = 0.0f;
                #pragma unroll
                for (int q = 0; q < 128; ++q) sum += acc[0][0][q];
                if (sum == 12345.678f) C[0] = __float2half(sum);
            }
"""


def no_c(src: str) -> str:
    start, end = epilogue_span(src)
    return src[:start] + SINK + src[end:]


VARIANTS = {"emitted": (lambda s: s, True), "store64x2": (store64x2, True),
            "no-wait": (no_wait, False), "no-C": (no_c, False)}


class Sampler:
    """NVML's SM clock (MHz) and board power (W), every 10 ms, on a thread."""

    def __init__(self):
        import pynvml

        pynvml.nvmlInit()
        self.nvml = pynvml
        self.handle = pynvml.nvmlDeviceGetHandleByIndex(cp.cuda.Device().id)

    def run(self, work, seconds: float) -> tuple[float, float]:
        samples, stop = [], threading.Event()

        def sample():
            start = time.perf_counter()
            while not stop.is_set():
                t = time.perf_counter() - start
                clock = self.nvml.nvmlDeviceGetClockInfo(self.handle, self.nvml.NVML_CLOCK_SM)
                power = self.nvml.nvmlDeviceGetPowerUsage(self.handle) / 1000
                samples.append((t, clock, power))
                time.sleep(0.01)

        thread = threading.Thread(target=sample)
        thread.start()
        end = time.perf_counter() + seconds
        i = 0
        while time.perf_counter() < end:
            work[i % len(work)]()
            i += 1
            if i % 64 == 0:
                cp.cuda.Device().synchronize()
        cp.cuda.Device().synchronize()
        stop.set()
        thread.join()
        kept = [(c, p) for t, c, p in samples if t > 0.1] or [(c, p) for _, c, p in samples]
        return float(np.mean([c for c, _ in kept])), float(np.mean([p for _, p in kept]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("sizes", nargs="+")
    ap.add_argument("--tile", default="examples/hopper/epilogue.tile")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--sustain", type=float, default=0.0)
    ap.add_argument("--data", nargs="+", default=["ints", "normal"])
    ap.add_argument("--only", nargs="+", default=list(VARIANTS))
    args = ap.parse_args()
    sizes = [tuple(int(v) for v in s.split("x")) for s in args.sizes]

    compiled = driver.compile_file(Path(args.tile))
    k, launch = compiled.kernels[0], compiled.launches[0]
    arch = runtime.device_arch()
    arch = arch + "a" if arch == "sm_90" else arch
    runs = {}
    for name in args.only:
        edit, checked = VARIANTS[name]
        module = runtime.load_module(edit(compiled.source), arch, name=f"probe_{name.replace('-', '_')}.cu")
        runs[name] = (runtime.launcher(module, launch), checked)
    clock = CudaClock(arch)
    sampler = Sampler() if args.sustain > 0 else None
    base = cublas()
    results = []
    for size in sizes:
        sizes_ = check_size(k, size)
        for name, (run, checked) in runs.items():
            if checked:
                report = Report(k.name, size, "probe")
                gpu_checks(k, run, sizes_, size, np.random.default_rng(1), report, Path("/tmp"))
                bad = [c for c in report.checks if not c.ok]
                print(f"{'x'.join(map(str, size))} {name}: {'PASS' if not bad else 'FAIL ' + str(bad)}")
        for data in args.data:
            sets, set_bytes = rotated_sets(size, 0, data)
            work = {name: kernel_calls(k, run, sizes_, size, sets) for name, (run, _) in runs.items()}
            work["cuBLAS"] = base.calls(k.gemm, size, sets)
            flop = 2.0 * size[0] * size[1] * size[2]
            names = list(work)
            for round_ in range(args.rounds):
                # each round in another order, so no variant always follows the same one
                shift = round_ % len(names)
                for name in names[shift:] + names[:shift]:
                    calls = work[name]
                    t = time_calls(calls, clock, warmup=10, repeat=args.repeat, set_bytes=set_bytes)
                    sustained = sampler is not None and round_ == 0
                    mhz, watts = sampler.run(calls, args.sustain) if sustained else (0.0, 0.0)
                    results.append((size, data, round_, name, t.median_ms, mhz, watts))
                    print(f"{'x'.join(map(str, size)):>16} {data:6} r{round_} {name:10} {t.median_ms * 1e3:8.1f} us "
                          f"{flop / t.median_ms / 1e9:7.1f} TFLOP/s" + (f"  {mhz:6.0f} MHz {watts:5.0f} W" if mhz else ""),
                          flush=True)
    print("\nsummary: median over rounds, x = the fastest cuBLAS time of the size and data / the variant's")
    for size in sizes:
        for data in args.data:
            rows = [r for r in results if r[0] == size and r[1] == data]
            best = min(r[4] for r in rows if r[3] == "cuBLAS")
            line = f"{'x'.join(map(str, size)):>16} {data:6}"
            for name in [*runs, "cuBLAS"]:
                ms = float(np.median([r[4] for r in rows if r[3] == name]))
                mhz = next(r[5] for r in rows if r[3] == name and r[2] == 0)
                watts = next(r[6] for r in rows if r[3] == name and r[2] == 0)
                power = f" ({mhz:.0f} MHz, {watts:.0f} W)" if mhz else ""
                line += f" | {name} {best / ms:.3f}{power}"
            print(line)


if __name__ == "__main__":
    main()
