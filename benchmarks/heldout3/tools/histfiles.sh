#!/bin/bash
# list json-ish trace files across all history of a bare mirror: commit path size
g=$1
git --git-dir=$g log --all --format='C %H' --name-only --diff-filter=AM | awk '/^C /{c=$2;next} NF{print c, $0}' | grep -iE '\.json(\.gz)?$' | grep -ivE 'package|tsconfig|config\.json|tokenizer|vocab|manifest|\.ipynb' | sort -k2 -u | while read c p; do s=$(git --git-dir=$g cat-file -s "$c:$p" 2>/dev/null); echo "$c $s $p"; done
