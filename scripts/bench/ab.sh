#!/usr/bin/env bash
# ab N CMD_A CMD_B: runs two `go test -bench` commands alternately N times (A first in odd rounds, B first in
# even ones), prints each round's ns/op and B/A, then the medians, the minima and the median of the per-round
# ratios. On a noisy machine (identical runs here moved ±30%) only that paired ratio says anything.
#
#   scripts/bench/ab.sh 6 "old.test -test.run '^\$' -test.bench Generate/base -test.benchtime 3x" "new.test -test.run '^\$' -test.bench Generate/base -test.benchtime 3x"
n=$1; a=$2; b=$3
ra=(); rb=()
for i in $(seq $n); do
  if (( i % 2 )); then order="a b"; else order="b a"; fi
  for w in $order; do
    if [ $w = a ]; then c=$a; else c=$b; fi
    v=$(bash -c "$c" 2>&1 | grep -m1 'ns/op' | awk '{for(i=1;i<=NF;i++) if($(i+1)=="ns/op") print $i}')
    if [ $w = a ]; then ra+=($v); else rb+=($v); fi
  done
  echo "round $i: A ${ra[-1]} B ${rb[-1]} B/A $(python3 -c "print(round(${rb[-1]}/${ra[-1]},3))")"
done
python3 - "${ra[*]}" "${rb[*]}" <<'P'
import sys,statistics as s
a=[float(x) for x in sys.argv[1].split()]; b=[float(x) for x in sys.argv[2].split()]
r=[y/x for x,y in zip(a,b)]
print("median A %.0f ms, median B %.0f ms, min A %.0f, min B %.0f, median pair ratio B/A %.3f" % (s.median(a)/1e6, s.median(b)/1e6, min(a)/1e6, min(b)/1e6, s.median(r)))
P
