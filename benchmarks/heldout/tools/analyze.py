import json, gzip, sys, re, collections, statistics, hashlib
import numpy as np

def load(path):
    raw = open(path,'rb').read()
    if raw[:2] == b'\x1f\x8b': raw = gzip.decompress(raw)
    try:
        d = json.loads(raw)
    except json.JSONDecodeError:
        # tolerate a truncated trailing list (legacy traces sometimes lack the final ])
        txt = raw.decode('utf-8', 'replace').rstrip().rstrip(',')
        d = json.loads(txt + ']')
    return raw, d

GPU_CATS = {'kernel','gpu_memcpy','gpu_memset','memcpy','memset'}
def union(iv):
    if not iv: return 0.0, []
    iv = sorted(iv)
    out = []; cs, ce = iv[0]
    for s,e in iv[1:]:
        if s <= ce: ce = max(ce, e)
        else: out.append((cs,ce)); cs, ce = s, e
    out.append((cs,ce))
    return sum(e-s for s,e in out), out

def clip_union(merged, windows):
    tot = 0.0
    wins = sorted(windows)
    for ws,we in wins:
        for s,e in merged:
            if e <= ws or s >= we: continue
            tot += min(e,we)-max(s,ws)
    return tot

def main(path, verbose=True):
    raw, d = load(path)
    sha = hashlib.sha1(raw).hexdigest()
    if isinstance(d, list): evs = d; meta = {}
    else: evs = d.get('traceEvents', []); meta = d
    devs = [ (p.get('name'), p.get('computeMajor'), p.get('computeMinor'), round(p.get('totalGlobalMem',0)/2**30,1)) for p in meta.get('deviceProperties',[]) or []]
    X = [e for e in evs if e.get('ph')=='X' and 'dur' in e]
    cats = collections.Counter((e.get('cat') or '') for e in X)
    gpu = [e for e in X if (e.get('cat') or '').lower() in GPU_CATS]
    steps = [e for e in X if re.match(r'ProfilerStep#\d+$', e.get('name','')) and (e.get('cat') or '').lower() not in ('gpu_user_annotation',)]
    # dedupe steps by name (keep longest host one)
    sd = {}
    for e in steps:
        n = e['name']
        if n not in sd or e['dur'] > sd[n]['dur']: sd[n] = e
    steps = sorted(sd.values(), key=lambda e: e['ts'])
    res = dict(file=path, sha1=sha, split=('tune' if int(sha[-1],16)%2==0 else 'held'), devices=devs,
               n_events=len(evs), cats=dict(cats.most_common(15)), schema=meta.get('schemaVersion'), torch_ver=meta.get('trace_id') and None)
    for k in ('distributedInfo','cupti_version','cuda_runtime_version','cuda_driver_version','with_flops'):
        if k in meta: res[k]=meta[k]
    res['n_steps'] = len(steps)
    sdur = [e['dur']/1000 for e in steps]
    res['step_ms'] = [round(x,2) for x in sdur]
    res['median_step_ms'] = round(statistics.median(sdur),2) if sdur else None
    if gpu:
        iv = [(float(e['ts']), float(e['ts'])+float(e['dur'])) for e in gpu]
        busy, merged = union(iv)
        span = max(e for s,e in iv) - min(s for s,e in iv)
        res['gpu_first_last_ms'] = round(span/1000,3)
        res['busy_gpu_span_pct'] = round(100*busy/span,1) if span>0 else None
        res['gpu_busy_ms'] = round(busy/1000,3)
        if steps:
            wins = [(float(e['ts']), float(e['ts'])+float(e['dur'])) for e in steps]
            cb = clip_union(merged, wins)
            res['busy_steps_pct'] = round(100*cb/sum(b-a for a,b in wins),1)
        # gaps
        gaps = sorted([(merged[i+1][0]-merged[i][1], merged[i][1]) for i in range(len(merged)-1)], reverse=True)[:8]
        res['top_gpu_gaps_us'] = [(round(g), round(t)) for g,t in gaps]
        streams = collections.Counter((e.get('pid'), e.get('tid')) for e in gpu)
        res['streams'] = {str(k):v for k,v in streams.most_common(8)}
        ker = [e for e in gpu if (e.get('cat') or '').lower()=='kernel']
        durs = np.array([e['dur'] for e in ker]) if ker else np.array([0])
        res['n_kernels'] = len(ker)
        res['kernel_ms'] = round(durs.sum()/1000,3)
        res['kernel_median_us'] = float(np.median(durs)); res['kernel_p90_us']=float(np.percentile(durs,90))
        res['kernel_frac_lt10us'] = round(float((durs<10).mean()),3)
        kt = collections.defaultdict(lambda:[0,0.0])
        for e in ker: kt[e['name']][0]+=1; kt[e['name']][1]+=e['dur']
        res['top_kernels'] = [(n[:90], c, round(t/1000,3)) for n,(c,t) in sorted(kt.items(), key=lambda x:-x[1][1])[:12]]
        mc = collections.defaultdict(lambda:[0,0.0,0])
        for e in gpu:
            if (e.get('cat') or '').lower()!='kernel':
                a = e.get('args',{})
                mc[e['name']][0]+=1; mc[e['name']][1]+=e['dur']; mc[e['name']][2]+=a.get('bytes',0) or 0
        res['memcpy_memset'] = {n:(c,round(t/1000,3),b) for n,(c,t,b) in mc.items()}
        names = ' '.join(kt.keys()).lower()
        res['nccl_kernels'] = sum(c for n,(c,t) in kt.items() if 'nccl' in n.lower())
        res['triton_kernels'] = sum(c for n,(c,t) in kt.items() if 'triton' in n.lower())
        gem = {n:(c,round(t/1000,3)) for n,(c,t) in kt.items() if re.search(r'gemm|sgemm|cutlass|xmma|ampere_|volta_|turing_|sm80|sm90|cublas|conv|implicit|winograd|cudnn|fft|wgrad|dgrad', n.lower())}
        res['gemm_conv_kernels'] = sorted(gem.items(), key=lambda x:-x[1][1])[:10]
    else:
        res['busy_gpu_span_pct'] = None
    # host side
    rt = collections.defaultdict(lambda:[0,0.0])
    for e in X:
        if (e.get('cat') or '').lower() in ('cuda_runtime','runtime','cuda_driver'):
            rt[e['name']][0]+=1; rt[e['name']][1]+=e['dur']
    res['runtime_top'] = [(n,c,round(t/1000,3)) for n,(c,t) in sorted(rt.items(), key=lambda x:-x[1][1])[:12]]
    ops = collections.defaultdict(lambda:[0,0.0])
    for e in X:
        if (e.get('cat') or '').lower() in ('cpu_op','operator'):
            ops[e['name']][0]+=1; ops[e['name']][1]+=e['dur']
    res['n_cpu_ops'] = sum(c for c,t in ops.values())
    res['cpu_ops_top'] = [(n[:70],c,round(t/1000,3)) for n,(c,t) in sorted(ops.items(), key=lambda x:-x[1][1])[:15]]
    for key in ('aten::item','aten::_local_scalar_dense','aten::copy_','aten::contiguous','aten::to','aten::nonzero','aten::clone'):
        if key in ops: res.setdefault('special_ops',{})[key] = (ops[key][0], round(ops[key][1]/1000,3))
    ua = collections.defaultdict(lambda:[0,0.0])
    for e in X:
        c = (e.get('cat') or '').lower()
        if c=='user_annotation' or 'dataloader' in e.get('name','').lower() or 'compile' in e.get('name','').lower() or 'dynamo' in e.get('name','').lower():
            ua[e['name'][:80]][0]+=1; ua[e['name'][:80]][1]+=e['dur']
    res['annotations'] = [(n,c,round(t/1000,3)) for n,(c,t) in sorted(ua.items(), key=lambda x:-x[1][1])[:15] if not n.startswith('ProfilerStep#')]
    pyf = sum(1 for e in X if (e.get('cat') or '').lower()=='python_function')
    res['n_python_function'] = pyf
    # host threads
    th = collections.Counter((e.get('pid'),e.get('tid')) for e in X if (e.get('cat') or '').lower() in ('cpu_op','operator','cuda_runtime','runtime','python_function','user_annotation'))
    res['host_threads'] = {str(k):v for k,v in th.most_common(5)}
    # host coverage of main thread inside steps / whole window: union of cpu_op+runtime+python events on main thread
    if th:
        mt = th.most_common(1)[0][0]
        hiv = [(float(e['ts']), float(e['ts'])+float(e['dur'])) for e in X if (e.get('pid'),e.get('tid'))==mt and (e.get('cat') or '').lower() in ('cpu_op','operator','cuda_runtime','runtime','python_function','user_annotation') and not re.match(r'ProfilerStep#', e.get('name',''))]
        hb, hm = union(hiv)
        if steps:
            wins = [(float(e['ts']), float(e['ts'])+float(e['dur'])) for e in steps]
            res['main_thread_covered_in_steps_pct'] = round(100*clip_union(hm,wins)/sum(b-a for a,b in wins),1)
        hs = max(b for a,b in hiv)-min(a for a,b in hiv) if hiv else 0
        res['main_thread_covered_span_pct'] = round(100*hb/hs,1) if hs else None
        res['host_span_ms'] = round(hs/1000,3)
    allts = [float(e['ts']) for e in X]; allte=[float(e['ts'])+float(e['dur']) for e in X]
    res['trace_span_ms'] = round((max(allte)-min(allts))/1000,3) if X else None
    return res

if __name__=='__main__':
    for p in sys.argv[1:]:
        r = main(p)
        print('=================', p)
        for k,v in r.items(): print(f'  {k}: {v}')
