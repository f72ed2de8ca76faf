"""Each batch worker's steps (_stage, _profile_and_report) and children (Popen to the end
the worker saw), one run: python3 worker_steps.py FOLDER."""
import json,glob,sys
t=sys.argv[1]
rs=[json.load(open(p)) for p in glob.glob(f'{t}/[0-9]*.json')]
t0=min(r['start'] for r in rs)
pyproc={r['pid']:r for r in rs}
for p in sorted(glob.glob(f'{t}/w-*.jsonl')):
    ev=[json.loads(l) for l in open(p)]
    print('worker', p.split('/')[-1])
    pop={}
    for e in ev:
        tt=e['t']-t0
        if e['ev']=='popen':
            pop[e['pid']]=(tt,e['cmd'])
        elif e['ev']=='ended':
            s,c=pop.get(e['pid'],(None,''))
            kind='ncu' if '/ncu' in c.split()[0] else ('cs' if 'sanitizer' in c else 'py')
            print(f"   child {kind:3s} popen {s:6.1f} ended-seen {tt:6.1f}")
        else:
            print(f"  {e['ev']:28s} {tt:6.1f}")
