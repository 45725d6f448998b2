# cmake -DIN=agent.bin -DOUT=agent_blob.c [-DSYM=up_agent_blob] -P embed.cmake: the blob
# as a C array named SYM (SYM_size its length).
if(NOT SYM)
  set(SYM up_agent_blob)
endif()
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" n)
math(EXPR size "${n} / 2")
string(REGEX REPLACE "(..)" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n\t" bytes "${bytes}")
file(WRITE ${OUT} "/* Generated from the agent's blob by embed.cmake: do not edit. */\n"
  "#include <stddef.h>\n#include <stdint.h>\n"
  "const uint8_t ${SYM}[] __attribute__((aligned(16))) = {\n\t${bytes}\n};\n"
  "const size_t ${SYM}_size = ${size};\n")
