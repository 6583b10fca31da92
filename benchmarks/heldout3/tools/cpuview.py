"""Top-level host ops (not nested in another op on the same thread) by total time, per thread; profiler steps."""
import collections, sys
sys.path.insert(0, __file__.rsplit("/", 1)[0])
from analyze import load
d = load(sys.argv[1])
ev = [e for e in d["traceEvents"] if isinstance(e, dict) and e.get("ph") == "X" and "dur" in e and str(e.get("cat", "")).lower() in ("cpu_op", "user_annotation", "operator", "python_function", "cuda_runtime")]
by = collections.defaultdict(list)
for e in ev:
    e["ts"] = float(e["ts"]); e["dur"] = float(e["dur"]); by[(e.get("pid"), e.get("tid"))].append(e)
for k, es in sorted(by.items(), key=lambda x: -len(x[1]))[:3]:
    es.sort(key=lambda e: (e["ts"], -e["dur"]))
    top, end = [], -1
    for e in es:
        if str(e.get("cat")).lower() == "python_function":
            continue
        if e["ts"] >= end:
            top.append(e); end = e["ts"] + e["dur"]
    span = (max(e["ts"] + e["dur"] for e in es) - min(e["ts"] for e in es)) / 1e3
    agg = collections.defaultdict(lambda: [0, 0.0])
    for e in top:
        agg[e["name"][:60]][0] += 1; agg[e["name"][:60]][1] += e["dur"]
    cov = sum(e["dur"] for e in top) / 1e3
    print("thread", k, "events", len(es), "span ms %.2f, top-level ops cover %.2f ms" % (span, cov))
    for n, v in sorted(agg.items(), key=lambda x: -x[1][1])[:10]:
        print("   %8.2f ms %4d %s" % (v[1] / 1e3, v[0], n))
