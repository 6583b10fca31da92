"""Quick look at a Chrome trace on stdin: devices, categories, step count, kernel count."""
import json, sys, collections
raw = sys.stdin.buffer.read()
try:
    d = json.loads(raw)
except Exception as e:
    print("BADJSON", str(e)[:80]); sys.exit()
ev = d["traceEvents"] if isinstance(d, dict) else d
devs = [p.get("name") for p in d.get("deviceProperties", [])] if isinstance(d, dict) else []
cats = collections.Counter(e.get("cat") for e in ev if isinstance(e, dict))
steps = sum(1 for e in ev if isinstance(e, dict) and str(e.get("name", "")).startswith("ProfilerStep#"))
kn = [e for e in ev if isinstance(e, dict) and str(e.get("cat", "")).lower() == "kernel"]
top = collections.Counter(e["name"][:50] for e in kn).most_common(3)
print(len(raw), "devs=", collections.Counter(devs).most_common(), "steps=", steps, "cats=", dict(cats.most_common(8)), "top=", top)
