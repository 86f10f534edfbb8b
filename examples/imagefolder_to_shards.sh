#!/usr/bin/env bash
# An ImageFolder tree (SRC/CLASS/.../IMAGE) as WebDataset tar shards, with find, sort,
# shuf, split and GNU tar only:
#
#   examples/imagefolder_to_shards.sh SRC OUT [SAMPLES_PER_SHARD]   # default 1000
#
# writes OUT/train-000000.tar, train-000001.tar, … (`--shards 'OUT/train-{000000..N}.tar'`)
# and OUT/classes.txt (the class names, label i on line i + 1). WebDataset's rules:
# - a sample is the run of consecutive members whose names share a key, the name up to
#   the first dot of its last component ("000042.jpg" and "000042.cls": key "000042"),
#   so each sample's members are written one after the other, and keys are made up
#   (a sample number) rather than taken from file names, which may hold dots
#   ("img.v2.jpg" would be key "img", extension "v2.jpg") or repeat across classes;
# - the extension says what a member is: the image's own, lower-cased ("JPG" → "jpg";
#   every image of the tree is one of ImageFolder's extensions), and "cls", the label as
#   decimal text;
# - a reader goes through a shard in member order, so the samples are shuffled once
#   here (a fixed seed: the same shards every time): shards of one class each would
#   make every window of a shard-aware shuffle one class.
# Classes and labels are ImageFolder's (the sorted subfolders, links followed; names
# without newlines or tabs). Members
# are regular files (links dereferenced) owned by 0:0 with mtime 0: the same tree gives
# the same bytes.
set -euo pipefail
src=${1:?usage: imagefolder_to_shards.sh SRC OUT [SAMPLES_PER_SHARD]}
out=${2:?usage: imagefolder_to_shards.sh SRC OUT [SAMPLES_PER_SHARD]}
per_shard=${3:-1000}
export LC_ALL=C  # byte order, as ImageFolder's sort of UTF-8 names

mkdir -p "$out"
stage=$(mktemp -d "$out/.stage.XXXXXX")
trap 'rm -rf "$stage"' EXIT

# The classes: SRC's immediate subfolders, sorted.
find -L "$src" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | sort > "$out/classes.txt"
[ -s "$out/classes.txt" ] || { echo "no class folders in $src" >&2; exit 2; }

# "LABEL<TAB>PATH" for every image, then shuffled with a fixed seed.
label=0
while IFS= read -r class; do
  find -L "$src/$class" -type f \( -iname '*.jpg' -o -iname '*.jpeg' -o -iname '*.png' \
    -o -iname '*.ppm' -o -iname '*.bmp' -o -iname '*.pgm' -o -iname '*.tif' \
    -o -iname '*.tiff' -o -iname '*.webp' \) -printf "$label\t%p\n"
  label=$((label + 1))
done < "$out/classes.txt" | sort -t $'\t' -k2 | shuf --random-source=<(yes) > "$stage/samples"

# One link and one .cls file per sample, named by its number: KEY.EXT and KEY.cls (at
# least 6 digits, all of one width so that name order is number order).
total=$(wc -l < "$stage/samples")
width=$((${#total} > 6 ? ${#total} : 6))
key=0
while IFS=$'\t' read -r label path; do
  name=$(printf '%0*d' "$width" "$key")
  ext=${path##*.}
  ln -s "$(realpath "$path")" "$stage/$name.${ext,,}"
  printf '%s' "$label" > "$stage/$name.cls"
  key=$((key + 1))
done < "$stage/samples"

# Members in key order (each sample's two members adjacent), per_shard samples a shard.
(cd "$stage" && find . -maxdepth 1 -name '[0-9]*.*' -printf '%f\n' | sort) |
  split -l $((2 * per_shard)) -d -a 6 - "$stage/shard-"
for list in "$stage"/shard-*; do
  tar --create --dereference --owner=0 --group=0 --numeric-owner --mtime=@0 \
    --file "$out/train-${list##*-}.tar" --directory "$stage" --files-from "$list"
done
echo "$key samples in $(ls "$stage"/shard-* | wc -l) shards in $out" >&2
