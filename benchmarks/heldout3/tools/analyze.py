"""Reader's own look at one Chrome/Kineto trace (.json or .json.gz).

Prints: devices, steps, GPU busy over the GPU span and over the steps, the largest idle gaps
inside the GPU span with what the launching thread was doing, runtime-call totals, memcpy kinds,
top kernels, GEMM precision hints, NCCL, DataLoader time.
"""
import collections
import gzip
import json
import sys

import numpy as np


def load(path):
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rb") as f:
        d = json.load(f)
    if isinstance(d, list):
        return {"traceEvents": d}
    return d


def union(iv):
    if not iv:
        return []
    iv = sorted(iv)
    out = [list(iv[0])]
    for s, e in iv[1:]:
        if s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def covered(u, a, b):
    t = 0.0
    for s, e in u:
        if e <= a or s >= b:
            continue
        t += min(e, b) - max(s, a)
    return t


GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset", "mtia_ccp_events"}


def main(path, ngaps=8):
    d = load(path)
    ev = [e for e in d["traceEvents"] if isinstance(e, dict) and e.get("ph") == "X" and "dur" in e]
    devs = [(p.get("name"), p.get("computeMajor")) for p in d.get("deviceProperties", [])]
    print("devices:", collections.Counter(devs).most_common())
    if "distributedInfo" in d:
        di = d["distributedInfo"]
        print("distributed:", {k: di.get(k) for k in ("backend", "rank", "world_size")})
    for e in ev:
        e["ts"] = float(e["ts"])
        e["dur"] = float(e["dur"])
        e["end"] = e["ts"] + e["dur"]
    cat = lambda e: str(e.get("cat", "")).lower()
    gpu = [e for e in ev if cat(e) in GPU_CATS]
    kern = [e for e in gpu if cat(e) == "kernel"]
    cpu = [e for e in ev if cat(e) in ("cpu_op", "operator", "user_annotation", "python_function", "cuda_runtime", "cuda_driver", "runtime")]
    rt = [e for e in ev if cat(e) in ("cuda_runtime", "cuda_driver", "runtime")]
    steps = sorted([e for e in ev if str(e.get("name", "")).startswith("ProfilerStep#") and cat(e) in ("cpu_op", "user_annotation", "operator")], key=lambda e: e["ts"])
    print("events:", len(ev), "kernels:", len(kern), "gpu ops:", len(gpu), "runtime calls:", len(rt))
    print("cats:", dict(collections.Counter(cat(e) for e in ev).most_common(12)))
    if ev:
        t0 = min(e["ts"] for e in ev)
        t1 = max(e["end"] for e in ev)
        print("trace span ms: %.2f" % ((t1 - t0) / 1e3))
    gu = union([(e["ts"], e["end"]) for e in gpu])
    if gu:
        gs, ge = gu[0][0], gu[-1][1]
        busy = sum(e - s for s, e in gu)
        print("GPU span ms: %.2f  busy ms: %.2f  busy_gpu_span_pct: %.1f" % ((ge - gs) / 1e3, busy / 1e3, 100 * busy / (ge - gs)))
        print("host before first GPU op ms: %.2f ; after last GPU op ms: %.2f" % ((gs - t0) / 1e3, (t1 - ge) / 1e3))
    if steps:
        durs = [s["dur"] / 1e3 for s in steps]
        print("steps:", len(steps), "names:", steps[0]["name"], "..", steps[-1]["name"])
        print("step ms:", ", ".join("%.2f" % x for x in durs), " median %.2f" % np.median(durs))
        if gu:
            tot = sum(s["dur"] for s in steps)
            b = sum(covered(gu, s["ts"], s["end"]) for s in steps)
            print("busy_steps_pct: %.1f" % (100 * b / tot))
            print("per-step busy %:", ", ".join("%.1f" % (100 * covered(gu, s["ts"], s["end"]) / s["dur"]) for s in steps))
    # launching thread = thread with most runtime calls
    thr = collections.Counter((e.get("pid"), e.get("tid")) for e in rt)
    main_thr = thr.most_common(1)[0][0] if thr else None
    if not main_thr and cpu:
        main_thr = collections.Counter((e.get("pid"), e.get("tid")) for e in cpu).most_common(1)[0][0]
    print("threads with runtime calls:", thr.most_common(4))
    # gaps
    if gu:
        gaps = [(gu[i + 1][0] - gu[i][1], gu[i][1], gu[i + 1][0]) for i in range(len(gu) - 1)]
        gaps.sort(reverse=True)
        tot_idle = sum(g[0] for g in gaps)
        print("idle inside GPU span ms: %.2f in %d gaps; gaps>=1ms: %.2f ms (%d); gaps<1ms: %.2f ms" % (
            tot_idle / 1e3, len(gaps), sum(g[0] for g in gaps if g[0] >= 1000) / 1e3, sum(1 for g in gaps if g[0] >= 1000),
            sum(g[0] for g in gaps if g[0] < 1000) / 1e3))
        mt = [e for e in cpu if (e.get("pid"), e.get("tid")) == main_thr]
        allcpu = cpu
        for g, a, b in gaps[:ngaps]:
            ov = []
            for e in allcpu:
                if e["end"] <= a or e["ts"] >= b:
                    continue
                o = min(e["end"], b) - max(e["ts"], a)
                if o > 0.2 * g and not str(e["name"]).startswith("ProfilerStep#"):
                    ov.append((o, e["dur"], e["name"][:60], cat(e), (e.get("tid") == main_thr[1]) if main_thr else None))
            ov.sort(key=lambda x: (x[1]))  # innermost (shortest) first
            rel = (a - gs) / 1e3
            print("  gap %.2f ms at +%.2f ms:" % (g / 1e3, rel), "; ".join("%s[%s] %.2f/%.2fms%s" % (n, c, o / 1e3, du / 1e3, "" if m else " (other thr)") for o, du, n, c, m in ov[:5]))
    # runtime totals
    rtt = collections.defaultdict(lambda: [0, 0.0])
    for e in rt:
        rtt[e["name"]][0] += 1
        rtt[e["name"]][1] += e["dur"]
    print("runtime calls (count, ms):", ", ".join("%s %d %.2f" % (k, v[0], v[1] / 1e3) for k, v in sorted(rtt.items(), key=lambda x: -x[1][1])[:10]))
    lk = [e["dur"] for e in rt if "LaunchKernel" in e["name"] or "hipModuleLaunch" in e["name"]]
    if lk:
        print("launch call median us: %.1f  p25 %.1f" % (np.median(lk), np.percentile(lk, 25)))
    # kernels
    if kern:
        kd = np.array([e["dur"] for e in kern])
        print("kernel time ms: %.2f  median us %.1f  <10us: %.0f%%" % (kd.sum() / 1e3, np.median(kd), 100 * (kd < 10).mean()))
        kt = collections.defaultdict(lambda: [0, 0.0])
        for e in kern:
            kt[e["name"][:90]][0] += 1
            kt[e["name"][:90]][1] += e["dur"]
        for k, v in sorted(kt.items(), key=lambda x: -x[1][1])[:10]:
            print("   %6.2f ms %5d  %s" % (v[1] / 1e3, v[0], k))
        gem = lambda n: any(s in n.lower() for s in ("gemm", "sgemm", "cutlass", "xmma", "conv", "implicit", "wgrad", "dgrad", "cudnn", "matmul", "nvjet", "winograd", "hgemm", "s884", "s1688", "h884", "h1688", "h16816", "s16816", "wmma", "sm80", "sm90", "mm_", "bmm"))
        gk = [e for e in kern if gem(e["name"])]
        print("gemm/conv-like kernel ms: %.2f of %.2f" % (sum(e["dur"] for e in gk) / 1e3, kd.sum() / 1e3))
        f32 = [e for e in gk if any(s in e["name"].lower() for s in ("sgemm", "gemm_f32", "_f32", "float", "fp32", "scudnn", "simt"))]
        print("fp32-looking gemm/conv ms: %.2f" % (sum(e["dur"] for e in f32) / 1e3))
        nccl = [e for e in kern if "nccl" in e["name"].lower()]
        if nccl:
            nu = union([(e["ts"], e["end"]) for e in nccl])
            cu = union([(e["ts"], e["end"]) for e in kern if "nccl" not in e["name"].lower()])
            nt = sum(e - s for s, e in nu)
            exposed = nt - sum(covered(cu, s, e) for s, e in nu)
            print("nccl kernels: %d, %.2f ms, exposed %.2f ms" % (len(nccl), nt / 1e3, exposed / 1e3))
        tri = [e for e in kern if e["name"].startswith("triton")]
        if tri:
            print("triton kernels: %d %.2f ms" % (len(tri), sum(e["dur"] for e in tri) / 1e3))
    # memcpy
    mc = collections.defaultdict(lambda: [0, 0.0, 0])
    for e in gpu:
        if cat(e) in ("gpu_memcpy", "memcpy", "gpu_memset", "memset"):
            k = e["name"]
            mc[k][0] += 1
            mc[k][1] += e["dur"]
            mc[k][2] += int((e.get("args") or {}).get("bytes", 0) or 0)
    if mc:
        print("copies:", "; ".join("%s n=%d %.2fms %.1fMB" % (k, v[0], v[1] / 1e3, v[2] / 1e6) for k, v in mc.items()))
    # notable cpu ops
    names = collections.defaultdict(lambda: [0, 0.0])
    for e in cpu:
        n = e["name"]
        if "DataLoader" in n or n.startswith(("Torch-Compiled", "CompiledFunction", "aten::item", "aten::_local_scalar", "Optimizer.", "aten::to", "aten::copy_", "cudaStreamSync", "cudaDeviceSync", "TorchDynamo", "Inductor", "nccl:", "c10d::", "record_param_comms", "aten::contiguous", "aten::nonzero")) or "compile" in n.lower():
            names[n[:70]][0] += 1
            names[n[:70]][1] += e["dur"]
    for k, v in sorted(names.items(), key=lambda x: -x[1][1])[:14]:
        print("   cpu %8.2f ms %5d  %s" % (v[1] / 1e3, v[0], k))
    # longest top-level cpu ops on main thread
    if main_thr:
        mt = sorted([e for e in cpu if (e.get("pid"), e.get("tid")) == main_thr and cat(e) in ("cpu_op", "user_annotation", "operator")], key=lambda e: -e["dur"])
        print("longest ops on launching thread:", "; ".join("%s %.2fms" % (e["name"][:50], e["dur"] / 1e3) for e in mt[:8]))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 8)
