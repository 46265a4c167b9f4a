# TRAINHOOKS_SANITIZE=<list>: builds every target of the project (libraries, tests, examples, the
# CLI) with the given sanitizers; `make sanitize` (address,undefined) and `make tsan` (thread)
# configure their own build directories with it. See docs/testing.md.
#
# LibTorch, protobuf and the other Debian libraries stay uninstrumented: their code is not
# checked, but their allocations go through ASan's malloc and their locks through TSan's pthread
# interceptors. The runtime options (suppression files, halt_on_error) come from the environment
# that the Makefile sets for ctest, which every test passes on to the programs it starts.
set(_sanitize "${TRAINHOOKS_SANITIZE}")
string(REPLACE ";" "," _sanitize "${_sanitize}")
if(_sanitize MATCHES "thread" AND _sanitize MATCHES "address")
  message(FATAL_ERROR "TRAINHOOKS_SANITIZE=${_sanitize}: ThreadSanitizer cannot be combined with AddressSanitizer")
endif()
foreach(_s IN ITEMS ${TRAINHOOKS_SANITIZE})
  string(REPLACE "," ";" _parts "${_s}")
  foreach(_p IN LISTS _parts)
    if(NOT _p MATCHES "^(address|undefined|thread|leak)$")
      message(FATAL_ERROR "TRAINHOOKS_SANITIZE: unknown sanitizer '${_p}' (address, undefined, thread, leak)")
    endif()
  endforeach()
endforeach()

# -fno-sanitize-recover: undefined behaviour ends the process, so that it fails its test instead
# of printing a line nobody reads. Frame pointers give ASan and TSan whole stack traces cheaply.
set(TRAINHOOKS_SANITIZE_FLAGS -fsanitize=${_sanitize} -fno-omit-frame-pointer)
if(_sanitize MATCHES "undefined")
  list(APPEND TRAINHOOKS_SANITIZE_FLAGS -fno-sanitize-recover=undefined)
endif()
add_compile_options(${TRAINHOOKS_SANITIZE_FLAGS})
add_link_options(-fsanitize=${_sanitize})
# -O1, as the sanitizers' documentation advises: instrumented code stays fast enough, and a
# LibTorch translation unit compiles in about half the time of -O3. No -g: the reports name
# functions from the symbol tables; configure with -DCMAKE_BUILD_TYPE=RelWithDebInfo for lines.
set(CMAKE_CXX_FLAGS_RELEASE "-O1 -DNDEBUG")
message(STATUS "trainhooks: sanitizers ${_sanitize}")

# Programs that link the installed static libraries need the sanitizer runtimes too
# (tests/install builds one): the exported targets carry the link option.
function(trainhooks_sanitize_exported target)
  target_link_options(${target} INTERFACE -fsanitize=${_sanitize})
endfunction()
