# causal_target_options(<target>): what causal's own targets compile with, set on each target so that
# nothing leaks into third-party code or overrides a build type's flags for the whole project.

# Warnings, as errors; third-party headers come in as system includes.
option(CAUSAL_WERROR "Treat warnings in causal's own sources as errors" ON)
set(CAUSAL_WARNINGS -Wall -Wextra -Wshadow -Wno-unused-parameter -Wno-missing-field-initializers)
if(CAUSAL_WERROR)
  list(APPEND CAUSAL_WARNINGS -Werror)
endif()

# ASan + UBSan for `tools/test --sanitize` (its own build folder).
option(CAUSAL_SANITIZE "Build with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)

# causal_target_options(<target> [TEST]): TEST compiles at -O1. A test binary's run time is LibTorch's
# kernels and its compile time is most of a clean build: -O1 compiles a test folder in 27.0 s where -O2
# takes 32.0 s (tests/model, 2 cores), and the precompiled header stays valid (both define __OPTIMIZE__).
function(causal_target_options target)
  target_compile_options(${target} PRIVATE ${CAUSAL_WARNINGS})
  if(CAUSAL_SANITIZE)
    # -O0 (last on the command line, so it wins over the build type's level): instrumented code compiles
    # much slower the more it is optimised (one unity file: -O2 51 s, -O1 35 s, -O0 24 s; the whole build
    # 1,749 s of CPU at -O1, 1,396 s at -O0), and the tests' run time is LibTorch's kernels, which are not
    # instrumented either way (the unit pass: 209 s at -O1, 231 s at -O0).
    target_compile_options(${target} PRIVATE -O0 -fsanitize=address,undefined -fno-omit-frame-pointer
      -fno-sanitize-recover=undefined)
    # GCC's flow analysis reports false "maybe uninitialized" inside libstdc++ under the sanitizers.
    target_compile_options(${target} PRIVATE -Wno-maybe-uninitialized)
    target_link_options(${target} PRIVATE -fsanitize=address,undefined)
  else()
    # The kernels are LibTorch's; our own code is glue that -O3 makes no faster, only slower to compile.
    if("TEST" IN_LIST ARGN)
      target_compile_options(${target} PRIVATE $<$<CONFIG:Release>:-O1>)
    else()
      target_compile_options(${target} PRIVATE $<$<CONFIG:Release>:-O2>)
    endif()
  endif()
endfunction()
