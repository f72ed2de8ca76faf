"""Busy cores and live grading processes by kind, second by second, of one run: python3
busy_by_second.py FOLDER (a tl-* folder of a timelines.tgz)."""
import json,glob,sys,re,collections
t=sys.argv[1]
rs=[json.load(open(p)) for p in glob.glob(f'{t}/*.json')]
t0=min(r['start'] for r in rs); t1=max(r['end'] for r in rs)
def kind(r):
    if r['cmd'].split()[0].endswith('/ncu'): return 'ncufe'
    for ch in r['chain']:
        m=re.search(r'--tool (\w+)',ch)
        if m: return m.group(1)[:4]
    if r['env_mode']=='sim': return 'sim'
    a=r['job'].get('action'); return a[:4] if a else '?'
B=int(t1-t0)+1
cpu=[0.0]*B; cnt=collections.defaultdict(lambda:[0]*B)
for r in rs:
    s=r['start']-t0; e=r['end']-t0; c=r['user']+r['sys']; k=kind(r)
    for b in range(int(s), int(e)+1):
        ov=max(0,min(e,b+1)-max(s,b))
        cpu[b]+=c*ov/max(e-s,1e-9)
        if ov>0.5: cnt[k][b]+=1
ks=sorted(cnt)
print('sec cpu', ' '.join(ks))
for b in range(0,B,2):
    print(f'{b:3d} {cpu[b]:5.1f}', ' '.join(f'{cnt[k][b]:2d}' for k in ks))
print('total cpu', sum(cpu), 'span', t1-t0)
