import json,glob,sys,re,collections
for t in sys.argv[1:]:
    rs=[json.load(open(p)) for p in glob.glob(f'/tmp/res/tl-{t}/*.json')]
    ncu=[r for r in rs if r['cmd'].split()[0].endswith('/ncu')]
    tgt=[r for r in rs if r['job'].get('action')=='profile' and r not in ncu]
    f=lambda L:(len(L), sum(r['user']+r['sys'] for r in L)/max(1,len(L)), sum(r['end']-r['start'] for r in L)/max(1,len(L)))
    print(t,'ncu n=%d cpu %.2f wall %.2f'%f(ncu),'target n=%d cpu %.2f wall %.2f'%f(tgt))
    # per notebook: span by cache dir
    by=collections.defaultdict(list)
    for r in rs:
        by[r['cache']].append(r)
    t0=min(r['start'] for r in rs); t1=max(r['end'] for r in rs)
    spans=[]
    for c,L in by.items():
        def ph(r):
            for ch in r['chain']:
                m=re.search(r'--tool (\w+)',ch)
                if m: return m.group(1)
            if r['cmd'].split()[0].endswith('/ncu'): return 'ncu'
            return 'sim' if r['env_mode']=='sim' else r['job'].get('action')
        d=collections.defaultdict(lambda:[1e18,0])
        for r in L:
            p=ph(r); d[p][0]=min(d[p][0],r['start']); d[p][1]=max(d[p][1],r['end'])
        s=min(v[0] for v in d.values()); e=max(v[1] for v in d.values())
        spans.append((s-t0, e-s, {k:(round(v[0]-s,1),round(v[1]-s,1)) for k,v in d.items()}))
    spans.sort()
    print(' batch span %.1f, notebooks %d, mean notebook span %.1f'%(t1-t0,len(spans),sum(x[1] for x in spans)/len(spans)))
    for s in spans[:6]+spans[-3:]: print('  %.1f +%.1f'%(s[0],s[1]), s[2])
