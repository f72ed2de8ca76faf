# usage: conc20.sh TREE TAG N  -- N concurrent probe20 runs of lesson 02 with tree TREE
TREE=$1; TAG=$2; N=$3
t0=$(python3 -c 'import time; print(time.time())')
for k in $(seq $N); do (cd $TREE && PYTHONPATH=$TREE:$PYTHONPATH python3 /work/probe/probe20.py 02_reduction ${TAG}-n$N-$k 2>&1 | tail -1) & done; wait
python3 -c "import time; print('$TAG n=$N wall', round(time.time()-$t0, 2))"
