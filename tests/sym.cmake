# Tests of the ELF reader's separate debug files (src/sym/elf.c): a small program is
# built, then copied, stripped and given its debug file in each of the ways gdb finds
# one (build-id, .gnu_debuglink next to it, in .debug/, under a debug root), plus debug
# files that must be refused (wrong CRC, wrong build-id).  Included by
# tests/CMakeLists.txt after insn.cmake (uprobe_unit) and cli.cmake (UPROBE_BIN).

set(_sym_dir ${CMAKE_BINARY_DIR}/tests/sym_debug)

# -O0 keeps every static function; -rdynamic puts the global ones in .dynsym, so that a
# stripped copy without its debug file still has those (and only those).
foreach(_t sym_stripped sym_stripped_alt)
  add_executable(${_t} ${CMAKE_CURRENT_LIST_DIR}/targets/sym_stripped.c)
  set_target_properties(${_t} PROPERTIES
    RUNTIME_OUTPUT_DIRECTORY ${UPROBE_TARGETS_DIR}
    COMPILE_OPTIONS "-O0;-g;-Wall"
    LINK_OPTIONS "-rdynamic;-Wl,--build-id=sha1")
endforeach()
target_compile_definitions(sym_stripped_alt PRIVATE SYM_ALT)

# The layout under ${_sym_dir} (every prog but orig/ is stripped with strip --strip-all):
#   orig/prog                 the unstripped build; prog.nm is its nm, prog.build-id its id
#   link/prog + prog.debug    .gnu_debuglink, same directory
#   sub/prog, sub/.debug/     .gnu_debuglink, in .debug/
#   rootlink/prog             .gnu_debuglink, under root/<rootlink's directory>/
#   bid/prog                  no debuglink; bidroot/.build-id/xx/yyyy.debug
#   badcrc/prog               .gnu_debuglink to a prog.debug changed after the link
#   nolink/prog               no debuglink, no debug file anywhere
#   wrongbid/prog             wrongbid/root/.build-id/xx/yyyy.debug is another build's
#   mismatch/prog             debuglink CRC right, but the debug file is another build's
#   empty/                    an empty debug root
#   libc.debug-path, libc.nm  when the C library's debug file is installed (libc6-dbg)
file(WRITE ${CMAKE_BINARY_DIR}/tests/sym_debug_setup.sh [=[#!/bin/sh
set -eu
prog=$1 alt=$2 d=$3 libc=$4
rm -rf "$d"
mkdir -p "$d"
cd "$d"
d=$(pwd -P)
mkdir empty orig link sub sub/.debug rootlink bid badcrc nolink wrongbid mismatch
cp "$prog" orig/prog
nm --defined-only orig/prog > prog.nm
objcopy --only-keep-debug orig/prog prog.debug
objcopy --only-keep-debug "$alt" alt.debug
cp orig/prog stripped
strip --strip-all stripped

id=$(readelf -n orig/prog | awk '/Build ID:/ { print $3 }')
test -n "$id"
xx=$(echo "$id" | cut -c1-2)
rest=$(echo "$id" | cut -c3-)
echo "$id" > prog.build-id

cp stripped link/prog
cp prog.debug link/prog.debug
objcopy --add-gnu-debuglink=link/prog.debug link/prog

cp stripped sub/prog
cp prog.debug sub/.debug/prog.debug
objcopy --add-gnu-debuglink=sub/.debug/prog.debug sub/prog

cp stripped rootlink/prog
mkdir -p "rootlink/root$d/rootlink"
cp prog.debug "rootlink/root$d/rootlink/prog.debug"
objcopy --add-gnu-debuglink=prog.debug rootlink/prog

cp stripped bid/prog
mkdir -p "bidroot/.build-id/$xx"
cp prog.debug "bidroot/.build-id/$xx/$rest.debug"

cp link/prog badcrc/prog
cp prog.debug badcrc/prog.debug
printf 'x' >> badcrc/prog.debug

cp stripped nolink/prog

cp stripped wrongbid/prog
mkdir -p "wrongbid/root/.build-id/$xx"
cp alt.debug "wrongbid/root/.build-id/$xx/$rest.debug"

cp stripped mismatch/prog
cp alt.debug mismatch/prog.debug
objcopy --add-gnu-debuglink=mismatch/prog.debug mismatch/prog

# the stripped copies really lost .symtab, and the debuglinks are there
for p in link sub rootlink bid badcrc nolink wrongbid mismatch; do
	! readelf -SW $p/prog | grep -q ' \.symtab '
done
readelf -SW link/prog | grep -q ' \.gnu_debuglink '

if [ -f "$libc" ]; then
	lid=$(readelf -n "$libc" | awk '/Build ID:/ { print $3 }')
	ldbg=/usr/lib/debug/.build-id/$(echo "$lid" | cut -c1-2)/$(echo "$lid" | cut -c3-).debug
	if [ -n "$lid" ] && [ -f "$ldbg" ]; then
		echo "$ldbg" > libc.debug-path
		nm --defined-only "$ldbg" > libc.nm
	fi
fi
echo "sym_debug: build-id $id, debug files under $d"
]=])

add_test(NAME sym.debug.setup
  COMMAND sh ${CMAKE_BINARY_DIR}/tests/sym_debug_setup.sh $<TARGET_FILE:sym_stripped>
          $<TARGET_FILE:sym_stripped_alt> ${_sym_dir} ${UPROBE_TEST_LIBC})
set_tests_properties(sym.debug.setup PROPERTIES FIXTURES_SETUP sym_debug)

uprobe_unit(test_sym_debug)
target_compile_definitions(test_sym_debug PRIVATE SYM_DEBUG_DIR="${_sym_dir}"
  UPROBE_TEST_LIBC="${UPROBE_TEST_LIBC}")
set_tests_properties(unit.test_sym_debug PROPERTIES FIXTURES_REQUIRED sym_debug)

# ---- uprobe list / decode on the stripped copies ---------------------------------------
# $0 uprobe, $1 the layout's directory, $2 the variant, $3 the debug roots, $4 "yes" when
# the static functions must be listed (at nm's addresses of the unstripped build), "no"
# when they must not (and then the global ones still are, from .dynsym).
set(_sym_list_check [=[
set -eu
out=$(UPROBE_DEBUG_DIRS="$1/$3" "$0" list "$1/$2/prog")
echo "$out"
for f in sym_static_add sym_static_mul sym_static_leaf sym_global_entry sym_global_twice
do
	a=$(awk -v f="$f" '$3 == f { print $1 }' "$1/prog.nm")
	test -n "$a"
	a=$(printf '0x%x' "$((0x$a))")
	if [ "$4" = no ] && [ "${f#sym_static_}" != "$f" ]
	then
		if echo "$out" | grep -qw "$f"
		then
			echo "FAIL: $f listed"
			exit 1
		fi
	elif ! echo "$out" | grep -qx "$a 0x[0-9a-f]* [0-9]* $f"
	then
		echo "FAIL: no '$a ... $f'"
		exit 1
	fi
done
echo PASS
]=])
foreach(_v "debuglink;link;empty;yes" "debug_subdir;sub;empty;yes"
           "debug_root;rootlink;rootlink/root;yes" "buildid;bid;bidroot;yes"
           "bad_crc;badcrc;empty;no" "no_debug_file;nolink;empty;no"
           "wrong_buildid;wrongbid;wrongbid/root;no")
  list(GET _v 0 _name)
  list(GET _v 1 _variant)
  list(GET _v 2 _roots)
  list(GET _v 3 _want)
  add_test(NAME cli.list.stripped_${_name}
    COMMAND sh -c "${_sym_list_check}" ${UPROBE_BIN} ${_sym_dir} ${_variant} ${_roots} ${_want})
  set_tests_properties(cli.list.stripped_${_name} PROPERTIES FIXTURES_REQUIRED sym_debug)
endforeach()

# decode of a static function by name: the debug file's symbol, the main file's bytes,
# exactly what the unstripped build decodes.
add_test(NAME cli.decode.stripped_static
  COMMAND sh -c "UPROBE_DEBUG_DIRS=$1/empty \"$0\" decode \"$1/orig/prog\" sym_static_mul > $1/mul.orig && UPROBE_DEBUG_DIRS=$1/bidroot \"$0\" decode \"$1/bid/prog\" sym_static_mul > $1/mul.bid && test -s $1/mul.orig && cmp $1/mul.orig $1/mul.bid && wc -l < $1/mul.bid && echo PASS"
          ${UPROBE_BIN} ${_sym_dir})
set_tests_properties(cli.decode.stripped_static PROPERTIES FIXTURES_REQUIRED sym_debug)

# cli.list.libc (cli.cmake) checks `uprobe list` against readelf of libc.so.6 alone: with
# libc6-dbg installed the debug file's local symbols would be listed too, so that test
# runs with no debug roots (libc's debuglink names nothing next to the library).  The C
# library through its debug file is test_sym_debug's libc test.
if(TEST cli.list.libc)
  set_tests_properties(cli.list.libc PROPERTIES ENVIRONMENT "UPROBE_DEBUG_DIRS=")
endif()

# The FDE ranges (src/sym/fde.c: where functions without symbols begin and end, and
# whether an address is a function's entry) against readelf's, over real files: both
# classes of the C library, bash, python3.11 (stripped, with 10,000 FDEs).
add_executable(fde_dump ${CMAKE_CURRENT_LIST_DIR}/tools/fde_dump.c)
target_include_directories(fde_dump PRIVATE ${UPROBE_PRIVATE_INCLUDE})
target_compile_definitions(fde_dump PRIVATE _GNU_SOURCE)
target_link_libraries(fde_dump PRIVATE uprobe)
add_test(NAME sym.fde
  COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/integration/fde_oracle.py $<TARGET_FILE:fde_dump>)

# Files a traced process names (src/sym/file.c): regular files only, a FIFO or device
# refused at once with the reason, a mapping's path held to its inode, a deleted
# mapping reached through /proc/PID/map_files, a .gnu_debuglink to a FIFO
uprobe_unit(test_sym_file)
set_tests_properties(unit.test_sym_file PROPERTIES TIMEOUT 30)

add_executable(unwind_dump ${CMAKE_CURRENT_LIST_DIR}/tools/unwind_dump.c)
target_include_directories(unwind_dump PRIVATE ${UPROBE_PRIVATE_INCLUDE})
target_compile_definitions(unwind_dump PRIVATE _GNU_SOURCE)
target_link_libraries(unwind_dump PRIVATE uprobe)
# the rows of libc's, ls's, bash's and python3's unwind tables equal readelf's CFA and
# rbp columns at every row it prints (the build time is make bench's to judge)
add_test(NAME sym.unwind_table
  COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/integration/unwind_oracle.py $<TARGET_FILE:unwind_dump>
    /lib/x86_64-linux-gnu/libc.so.6 /bin/ls /bin/bash /usr/bin/python3.11)
set_tests_properties(sym.unwind_table PROPERTIES TIMEOUT 300)
