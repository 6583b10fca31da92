import sys, json, gzip, re, collections, bisect
sys.path.insert(0,'/work/heldout/tools')
from analyze import load, union, GPU_CATS
HOSTC = ('cpu_op','operator','cuda_runtime','runtime','python_function','user_annotation','cuda_driver')
def run(path, step=20.0):
    raw,d = load(path)
    evs = d if isinstance(d,list) else d.get('traceEvents',[])
    X=[e for e in evs if e.get('ph')=='X' and 'dur' in e]
    gpu=[(float(e['ts']),float(e['ts'])+float(e['dur'])) for e in X if (e.get('cat') or '').lower() in GPU_CATS]
    host=[e for e in X if (e.get('cat') or '').lower() in HOSTC and not e['name'].startswith('ProfilerStep#')]
    th=collections.Counter((e['pid'],e['tid']) for e in host)
    if not th: print(path,'no host'); return
    mt=th.most_common(1)[0][0]
    ALL=__import__('os').environ.get('ALLTHREADS')
    hm=[(float(e['ts']),float(e['ts'])+float(e['dur']),e) for e in host if (ALL and e['pid']==mt[0]) or (e['pid'],e['tid'])==mt]
    hm.sort(key=lambda x:x[0])
    starts=[h[0] for h in hm]
    steps=[(float(e['ts']),float(e['ts'])+float(e['dur'])) for e in X if re.match(r'ProfilerStep#\d+$',e['name']) and (e.get('cat') or '').lower()!='gpu_user_annotation']
    if gpu:
        _,merged=union(gpu)
        lo,hi=merged[0][0],merged[-1][1]
        idle=[(merged[i][1],merged[i+1][0]) for i in range(len(merged)-1)]
    else:
        lo=min(s for s,e,_ in hm); hi=max(e for s,e,_ in hm); idle=[(lo,hi)]; merged=[]
    def deepest(t):
        i=bisect.bisect_right(starts,t)
        best=None
        # scan back a bounded amount
        for j in range(i-1, max(-1,i-6000), -1):
            s,e,ev=hm[j]
            if s<=t<e:
                if best is None or (e-s)<(best[1]-best[0]): best=(s,e,ev)
        return best
    def classify(regions, label):
        agg=collections.Counter(); tot=0
        for a,b in regions:
            t=a+step/2
            while t<b:
                x=deepest(t); tot+=step
                if x is None: agg['<no host event on main thread>']+=step
                else:
                    ev=x[2]; agg[ev['name'][:80]]+=step
                t+=step
        print(f'  [{label}] idle sampled {tot/1000:.2f} ms')
        for n,v in agg.most_common(10): print(f'     {v/1000:9.2f} ms  {100*v/max(tot,1):5.1f}%  {n}')
    print('==',path, 'main thread', mt)
    if gpu:
        pre=(min(s for s,e,_ in hm), lo)
        print(f'  host before first GPU activity: {(lo-pre[0])/1000:.2f} ms; after last: {(max(e for s,e,_ in hm)-hi)/1000:.2f} ms')
        classify([pre],'before first GPU')
    classify(idle,'GPU idle between first/last GPU activity' if gpu else 'whole host span (no GPU)')
    if steps and gpu:
        clipped=[]
        for a,b in idle:
            for s,e in steps:
                if b>s and a<e: clipped.append((max(a,s),min(b,e)))
        # also idle in steps before first gpu / after last
        for s,e in steps:
            if s<lo: clipped.append((s,min(e,lo)))
            if e>hi: clipped.append((max(s,hi),e))
        classify(clipped,'GPU idle inside ProfilerSteps')
if __name__=='__main__':
    for p in sys.argv[1:]: run(p)
