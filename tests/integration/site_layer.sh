#!/bin/sh
# The probe-site layer (src/site/) sits beneath the arbiter (src/uprobes.c) and never
# calls up into it.  Checked two ways, either failing the test:
#  1. includes: no file of src/site/ reaches src/uprobes_int.h, directly or through the
#     headers it includes (followed through src/ and include/);
#  2. symbols: no object file of src/site/ refers to a symbol that uprobes.c's object
#     defines (its public API included: unregister_uprobe, uprobe_read, ...).
# Usage: site_layer.sh SOURCE_DIR OBJECT...   (the library's objects)
set -u
src=$1
shift
objects=$*
fail=0

# 1. the include closure of each file of the layer
for f in "$src"/src/site/*.c "$src"/src/site/*.h; do
	seen=" "
	todo=$f
	while [ -n "$todo" ]; do
		set -- $todo
		cur=$1
		shift
		todo=$*
		for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]\([^>"]*\)[>"].*/\1/p' "$cur"); do
			case $inc in
			uprobes_int.h | */uprobes_int.h)
				echo "FAIL: $cur includes $inc (from ${f#$src/})"
				fail=1
				continue ;;
			esac
			for dir in "$src/src" "$src/include" "$(dirname "$cur")"; do
				h=$dir/$inc
				if [ -f "$h" ]; then
					case $seen in *" $h "*) ;; *) seen="$seen$h "; todo="$todo $h" ;; esac
					break
				fi
			done
		done
	done
done

# 2. what the layer's objects need from what the arbiter's defines
site_objs=
arbiter=
for o in $objects; do
	case $o in
	*/site/*.o) site_objs="$site_objs $o" ;;
	*/uprobes.c.o) arbiter=$o ;;
	esac
done
if [ -z "$site_objs" ] || [ -z "$arbiter" ]; then
	echo "FAIL: no objects of src/site/ or of uprobes.c among the arguments"
	exit 1
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
nm --defined-only "$arbiter" | awk '$2 ~ /^[TDBR]$/ {print $3}' | sort -u >"$tmp/arbiter.def"
nm --undefined-only "$arbiter" | awk '{print $NF}' | sort -u >"$tmp/arbiter.und"
nm --defined-only $site_objs | awk '$2 ~ /^[TDBR]$/ {print $3}' | sort -u >"$tmp/site.def"
nm --undefined-only $site_objs | awk 'NF >= 1 && $NF !~ /:$/ {print $NF}' | sort -u >"$tmp/site.und"
comm -12 "$tmp/site.und" "$tmp/arbiter.def" >"$tmp/up"
comm -12 "$tmp/arbiter.und" "$tmp/site.def" >"$tmp/down"
echo "the arbiter calls $(wc -l <"$tmp/down") names of the site layer:" $(cat "$tmp/down")
echo "the site layer calls $(wc -l <"$tmp/up") names of the arbiter" $(cat "$tmp/up")
if [ -s "$tmp/up" ]; then
	echo "FAIL: src/site/ calls up into the arbiter"
	fail=1
fi
[ $fail = 0 ] && echo "PASS: no circle between src/uprobes.c and src/site/"
exit $fail
