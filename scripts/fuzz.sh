#!/bin/sh
# SPDX-License-Identifier: MIT
# Bounded libFuzzer runs of the fuzz targets in fuzz/ (`make fuzz`).
#
#   scripts/fuzz.sh [SECONDS]      SECONDS per target: the argument, else $FUZZ_SECONDS, else 60
#   FUZZ_TARGETS="spec insn"       only these targets (default: every fuzz/fuzz_*.c)
#
# Builds each target with clang -fsanitize=fuzzer,address,undefined straight from the
# library sources it needs, into build-fuzz/, copies the checked-in corpus to
# build-fuzz/corpus-<name> (new inputs stay out of the repository and accumulate
# over runs), runs each target for the time given and exits non-zero when any of them
# crashed, leaked or hung, naming the input and how to replay it.
set -eu

cd "$(dirname "$0")/.."
secs=${1:-${FUZZ_SECONDS:-60}}
case $secs in
'' | *[!0-9]*) echo "fuzz: SECONDS must be a number, not '$secs'" >&2; exit 2 ;;
esac

CLANG=${CLANG:-clang}
if ! command -v "$CLANG" >/dev/null 2>&1; then
	echo "fuzz: clang not found (apt-get install clang), skipped"
	exit 0
fi

out=build-fuzz
mkdir -p "$out/obj"
SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
CFLAGS="-g -O1 -std=gnu11 -D_GNU_SOURCE -Isrc -Iinclude -Wall -Wextra -Wno-unused-parameter"
LIBS="-lZydis -lelf -ldw"
LIB_SRCS="$(ls src/arch/x86/*.c) src/trace/spec.c src/trace/fetch.c src/trace/format.c src/sym/elf.c
	src/sym/file.c src/sym/fde.c src/sym/unwind.c src/trace/raw.c src/trace/stack.c src/agent/rec.c"
targets=${FUZZ_TARGETS:-$(ls fuzz/fuzz_*.c | sed 's|fuzz/fuzz_||; s|\.c$||')}

# the library sources, instrumented, once for every target (rebuilt each run: a few
# seconds, and never stale while others edit src/)
objs=
for src in $LIB_SRCS; do
	obj="$out/obj/$(echo "$src" | sed 's|^src/||; s|/|_|g; s|\.c$|.o|')"
	# shellcheck disable=SC2086
	$CLANG $CFLAGS $SAN -fsanitize=fuzzer-no-link -c -o "$obj" "$src"
	objs="$objs $obj"
done

for t in $targets; do
	echo "fuzz: building fuzz_$t"
	extra=
	case $t in
	# the shared region's reader: ring.c alone, the process it would need stubbed in
	# the target (weak definitions the replay build's library overrides)
	region) extra="src/agent/ring.c" ;;
	esac
	# shellcheck disable=SC2086
	$CLANG $CFLAGS $SAN -fsanitize=fuzzer -o "$out/fuzz_$t" "fuzz/fuzz_$t.c" $extra $objs $LIBS
done

export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

failed=0
summary=
for t in $targets; do
	corpus="$out/corpus-$t"
	mkdir -p "$corpus"
	if [ -d "fuzz/corpus/$t" ]; then
		cp -n fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null || true
	fi
	log="$out/fuzz_$t.log"
	prefix="$out/artifacts-$t/"
	mkdir -p "$prefix"
	before=$(ls "$prefix" | wc -l)
	echo "fuzz: running fuzz_$t for ${secs}s over $corpus ($(ls "$corpus" | wc -l) inputs)"
	case $t in
	insn) max_len=32 ;;
	spec) max_len=1024 ;;
	region) max_len=4096 ;;
	*) max_len=16384 ;;
	esac
	rc=0
	"$out/fuzz_$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
		-max_len="$max_len" -print_final_stats=1 -artifact_prefix="$prefix" \
		"$corpus" >"$log" 2>&1 || rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	execs=${execs:-?}
	after=$(ls "$prefix" | wc -l)
	if [ "$rc" -ne 0 ] || [ "$after" -gt "$before" ]; then
		failed=1
		crash=$(ls -t "$prefix" 2>/dev/null | head -n 1)
		echo "fuzz: fuzz_$t FAILED (exit $rc) after $execs executions; log: $log"
		grep -E '^(==[0-9]+==ERROR|SUMMARY|fuzz_[a-z]+: check failed)' "$log" | head -n 5 || true
		if [ -n "$crash" ]; then
			echo "fuzz:   input: $prefix$crash"
			echo "fuzz:   replay: $out/fuzz_$t $prefix$crash"
			echo "fuzz:       or: build/fuzz/fuzz_${t}_replay < $prefix$crash"
		fi
		summary="$summary
  $t: FAILED, $execs executions, corpus $(ls "$corpus" | wc -l) inputs"
	else
		summary="$summary
  $t: ok, $execs executions, corpus $(ls "$corpus" | wc -l) inputs"
	fi
done
echo "fuzz: summary (${secs}s per target):$summary"
exit $failed
