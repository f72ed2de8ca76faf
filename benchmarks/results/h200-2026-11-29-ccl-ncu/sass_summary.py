"""Per-opcode share of the executed warp instructions (and stall samples) of one kernel of
ncu's source page (`ncu --import ccl.ncu-rep --page source --print-source sass --csv`); with
a count N, the N most executed instructions. Usage: sass_summary.py KERNEL_INDEX [N] < sass.csv"""
import csv, sys, collections, re
rows = list(csv.reader(sys.stdin))
blocks = []
for i, r in enumerate(rows):
    if r and r[0] == 'Kernel Name':
        blocks.append([r[1], rows[i+1], []])
    elif blocks and r and r[0] != 'Address' and len(r) > 5:
        blocks[-1][2].append(r)
which = int(sys.argv[1])
name, hdr, body = blocks[which]
ix = {h: k for k, h in enumerate(hdr)}
print(name[:90], len(body))
tot = 0; by_op = collections.Counter(); stall = collections.Counter()
ie = ix['Instructions Executed']; ss = ix['Warp Stall Sampling (All Samples)']
for r in body:
    n = int(r[ie].replace(',', '') or 0); tot += n
    op = r[ix['Source']].split()[0] if r[ix['Source']].split() else ''
    if op.startswith('@'): op = r[ix['Source']].split()[1]
    by_op[op.split('.')[0]] += n
    stall[op.split('.')[0]] += int(r[ss].replace(',', '') or 0)
print('total warp instr', tot)
for op, n in by_op.most_common(25): print(f'{op:10s} {n/tot*100:5.1f}%  stall samples {stall[op]}')
if len(sys.argv) > 2:
    # print the top lines by executed count with address
    top = sorted(body, key=lambda r: -int(r[ie].replace(',', '') or 0))[:int(sys.argv[2])]
    for r in top: print(r[ix['Address']], r[ie], r[ss], r[ix['Source']][:80])
