#!/bin/bash
# save.sh GITDIR COMMIT PATH SHORT  -> /work/heldout3/traces/SHORT.json.gz (gzip of exact decompressed content)
g=$1; c=$2; p=$3; s=$4
out=/work/heldout3/traces/$s.json.gz
if [[ $p == *.gz ]]; then git --git-dir=$g show "$c:$p" | gunzip > /tmp/h3_$s.json; else git --git-dir=$g show "$c:$p" > /tmp/h3_$s.json; fi
sz=$(stat -c %s /tmp/h3_$s.json); sha=$(sha1sum /tmp/h3_$s.json | cut -c1-40)
gzip -c /tmp/h3_$s.json > $out; rm /tmp/h3_$s.json
echo -e "$s\t$sha\t$sz" >> /work/heldout3/saved.tsv
echo "$s $sha $sz"
