import json,glob,sys,re
rs=[json.load(open(p)) for p in glob.glob(sys.argv[1]+'/*.json')]
t0=min(r['start'] for r in rs)
def phase(r):
    a=r['job'].get('action')
    for c in r['chain']:
        m=re.search(r'--tool (\w+)',c)
        if m: return m.group(1)
        if 'ncu' in c.split()[0:1][0] if c.split() else False: return 'profile'
    if r['env_mode']=='sim' or r['job'].get('mode')=='sim': return 'sim'
    return a
for r in rs: r['phase']=phase(r)
if len(sys.argv)>2:
  for r in sorted(rs,key=lambda r:r['start']):
    fs=r['fsync']
    print(f"{r['phase']:10s} pid {r['pid']} start {r['start']-t0:6.2f} first-ev {r['start']-t0+(fs[0][0] if fs else -1):6.2f} last-ev {r['start']-t0+(fs[-1][0] if fs else -1):6.2f} end {r['end']-t0:6.2f} cpu {r['user']+r['sys']:5.2f} n_ev {len(fs)} ids {len(r['job'].get('ids') or [])} {r['chain'][0][:60]}")
import collections
agg=collections.defaultdict(list)
for r in rs:
    fs=r['fsync']
    agg[r['phase']].append((r['end']-r['start'], fs[0][0] if fs else 0, r['end']-r['start']-(fs[-1][0] if fs else 0), r['user']+r['sys']))
for k,v in agg.items():
    n=len(v); print(f"{k:10s} n {n:3d} wall {sum(x[0] for x in v)/n:6.2f} to-first-event {sum(x[1] for x in v)/n:5.2f} tail {sum(x[2] for x in v)/n:5.2f} cpu {sum(x[3] for x in v)/n:5.2f} cpu-total {sum(x[3] for x in v):7.1f}")
