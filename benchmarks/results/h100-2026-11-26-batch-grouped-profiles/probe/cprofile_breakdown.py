import pstats,glob,json,sys
keys={'import':('<frozen importlib._bootstrap>',None,'_find_and_load'),}
def cum(s, fname_sub, func):
    t=0
    for k,v in s.stats.items():
        if fname_sub in k[0] and k[2]==func: t=max(t,v[3])
    return t
for f in sorted(glob.glob(sys.argv[1]+'/*.prof')):
    pid=f.split('/')[-1][:-5]; r=json.load(open(f[:-5]+'.json'))
    s=pstats.Stats(f)
    tot=sum(v[2] for v in s.stats.values())
    items={
     'src2code':cum(s,'bootstrap_external','source_to_code'),
     'compile_cuda':cum(s,'numba/cuda/compiler.py','compile_cuda'),
     'load_overload':cum(s,'caching.py','load_overload'),
     'registries':cum(s,'cuda/target.py','load_additional_registries'),
     'ctx':cum(s,'devices.py','get_or_create_context') ,
     'launch':cum(s,'dispatcher.py','launch'),
     'warm_up':cum(s,'gpu_compile/step.py','warm_up'),
     'check_ex':cum(s,'grader/exercise.py','check_exercise'),
     'kc_install':cum(s,'kernel_cache.py','install'),
     'exec_cell':cum(s,'grader/runner.py','exec_cell'),
     'sync':cum(s,'grader/runner.py','_synchronize'),
    }
    print(pid, r['job'].get('action'), r['env_mode'], 'tot %.2f'%tot, ' '.join(f'{k} {v:.2f}' for k,v in items.items()))
