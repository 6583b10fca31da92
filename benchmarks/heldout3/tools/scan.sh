#!/bin/bash
# scan.sh GITDIR : every json/json.gz blob in history (>3KB), peek those that look like Kineto traces
g=$1
git --git-dir=$g log --all --format='C %H' --name-only 2>/dev/null | awk '/^C /{c=$2;next} NF{print c, $0}' | grep -iE '\.json(\.gz)?$|trace[^/]*\.gz$' | grep -ivE 'package(-lock)?\.json|tsconfig|tokenizer|vocab|\.ipynb|eslint|manifest' | sort -k2 -u | while read c p; do
  s=$(git --git-dir=$g cat-file -s "$c:$p" 2>/dev/null); [ -z "$s" ] && continue; [ "$s" -lt 3000 ] && continue
  if [[ $p == *.gz ]]; then head=$(git --git-dir=$g show "$c:$p" | gunzip 2>/dev/null | head -c 3000); else head=$(git --git-dir=$g show "$c:$p" | head -c 3000); fi
  if echo "$head" | grep -qE 'traceEvents|"ph"'; then echo "$c $s $p :: $(echo "$head" | grep -oE '"name": "[^"]*(GPU|Tesla|NVIDIA|AMD|Radeon|Instinct)[^"]*"' | head -1)"; fi
done
