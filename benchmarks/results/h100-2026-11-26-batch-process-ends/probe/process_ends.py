"""How long after a grading process's last Python-level moment (the probe's atexit record)
its parent saw it end, by kind of process: python3 process_ends.py FOLDER."""
import json,glob,sys,re,statistics as st
t=sys.argv[1]
rs=[json.load(open(p)) for p in glob.glob(f'{t}/[0-9]*.json')]
t0=min(r['start'] for r in rs)
byjob={}
for r in rs:
    m=re.search(r'(\S+job\.json)', r['cmd'])
    if m and not r['cmd'].split()[0].endswith('/ncu'): byjob[m.group(1)]=r
out={'cs':[], 'py':[], 'ncu':[]}; start={'cs':[], 'py':[], 'ncu':[]}
for p in glob.glob(f'{t}/w-*.jsonl'):
    ev=[json.loads(l) for l in open(p)]
    pop={}
    for e in ev:
        if e['ev']=='popen': pop[e['pid']]=(e['t'],e['cmd'])
        elif e['ev']=='ended' and e['pid'] in pop:
            s,c=pop[e['pid']]
            m=re.search(r'(\S+job\.json)', c)
            if not m or m.group(1) not in byjob: continue
            r=byjob[m.group(1)]
            kind='ncu' if c.split()[0].endswith('ncu') else ('cs' if 'sanitizer' in c else 'py')
            out[kind].append(e['t']-r['end']); start[kind].append(r['start']-s)
for k in out:
    if out[k]: print(k, len(out[k]), 'popen->py start: med %.2f max %.2f'%(st.median(start[k]),max(start[k])), ' py end->seen: med %.2f max %.2f sum %.1f'%(st.median(out[k]),max(out[k]),sum(out[k])))
print('by kind of py process')
for p in glob.glob(f'{t}/w-*.jsonl'):
    ev=[json.loads(l) for l in open(p)]
    pop={}
    for e in ev:
        if e['ev']=='popen': pop[e['pid']]=(e['t'],e['cmd'])
        elif e['ev']=='ended' and e['pid'] in pop:
            s,c=pop[e['pid']]
            m=re.search(r'(\S+job\.json)', c)
            if not m or m.group(1) not in byjob: continue
            r=byjob[m.group(1)]
            print(' ', r['env_mode'], r['job'].get('action'), 'life %.1f'%(r['end']-r['start']), 'teardown %.2f'%(e['t']-r['end']), 'at %.1f'%(r['end']-t0))
