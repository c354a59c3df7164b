# The numerics matrix (docs/numerics.md): the test cases tagged [numerics] (comparisons of two
# computations that differ only in rounding) again under each BLAS and ATen kernel type this CPU runs, with
# 1 and 2 threads; `ctest -L numerics`. Included from the CAUSAL_TESTS block, after the test binary exists.

# The BLAS inside LibTorch, set before this file is included: "openblas" (Debian's libtorch) or "mkl"
# (PyPI's torch wheel).
if(NOT DEFINED CAUSAL_TORCH_BLAS OR CAUSAL_TORCH_BLAS STREQUAL "")
  set(CAUSAL_TORCH_BLAS openblas)
endif()

# Kernel types as VARIABLE=value|cpu flags it needs (/proc/cpuinfo names, comma-separated). ATen's own
# vectorised kernels (softmax, exp, reductions, norms) are chosen by ATEN_CPU_CAPABILITY in both builds.
set(causal_numerics_aten_kernels
  "ATEN_CPU_CAPABILITY=default|"
  "ATEN_CPU_CAPABILITY=avx2|avx2,fma"
  "ATEN_CPU_CAPABILITY=avx512|avx512f,avx512bw,avx512vl,avx512dq")
if(CAUSAL_TORCH_BLAS STREQUAL "openblas")
  # OpenBLAS built with DYNAMIC_ARCH takes another CPU's kernels from OPENBLAS_CORETYPE (pni = SSE3).
  set(causal_numerics_kernels
    "OPENBLAS_CORETYPE=Prescott|pni"
    "OPENBLAS_CORETYPE=Haswell|avx2,fma"
    "OPENBLAS_CORETYPE=SkylakeX|avx512f,avx512bw,avx512vl,avx512dq,avx512cd"
    "OPENBLAS_CORETYPE=Zen|avx2,fma")
elseif(CAUSAL_TORCH_BLAS STREQUAL "mkl")
  set(causal_numerics_kernels
    "MKL_ENABLE_INSTRUCTIONS=SSE4_2|sse4_2"
    "MKL_ENABLE_INSTRUCTIONS=AVX2|avx2,fma"
    "MKL_ENABLE_INSTRUCTIONS=AVX512|avx512f,avx512bw,avx512vl,avx512dq")
else()
  message(FATAL_ERROR "CAUSAL_TORCH_BLAS is \"${CAUSAL_TORCH_BLAS}\": expected openblas or mkl")
endif()
list(APPEND causal_numerics_kernels ${causal_numerics_aten_kernels})

# Entries per kernel type and thread count, as name=Catch test spec over the one test binary; a name is the
# test folder whose cases the tags select. The flash cases have entries of their own (`ctest -L numerics -R
# flash`). "run" takes every [numerics] case the other specs leave, so a new case is never left out (tag it
# to move it). "-w NoTests" fails an entry or a comma-separated part of one that selects no case, so one that
# loses its cases is noticed here. dist trains real 2-rank models (about 15 s an entry): it runs in two
# entries only, the BLAS's oldest kernels with 1 thread and ATen's with 2.
set(causal_numerics_entries "model/flash=[numerics][flash]"
  "model=[numerics][model]~[flash],[numerics][attention]~[flash]" "task=[numerics][text],[numerics][parity]"
  "train=[numerics][train]" "run=[numerics]~[flash]~[model]~[attention]~[text]~[parity]~[train]~[dist]")
set(causal_numerics_slow_entries "dist=[numerics][dist]")
set(causal_numerics_slow_kernels "OPENBLAS_CORETYPE=Prescott threads=1" "MKL_ENABLE_INSTRUCTIONS=SSE4_2 threads=1"
  "ATEN_CPU_CAPABILITY=default threads=2")

# This CPU's flags, read at configure time: a kernel type it cannot execute is not registered (OpenBLAS
# would stop on an illegal instruction). At run time the test binary also checks that the kernel it was
# asked for is the one running, and prints "SKIPPED: why" when it is not.
set(causal_cpu_flags " ")
if(EXISTS /proc/cpuinfo)
  file(STRINGS /proc/cpuinfo causal_flag_lines REGEX "^flags[ \t]*:" LIMIT_COUNT 1)
  string(REGEX REPLACE "^flags[ \t]*:" " " causal_cpu_flags " ${causal_flag_lines} ")
endif()

set(causal_numerics_script "")
foreach(kernel ${causal_numerics_kernels})
  string(REPLACE "|" ";" kernel_parts "${kernel}")
  list(GET kernel_parts 0 setting)
  list(LENGTH kernel_parts parts)
  set(missing "")
  if(parts GREATER 1)
    list(GET kernel_parts 1 needs)
    string(REPLACE "," ";" needs "${needs}")
    foreach(flag ${needs})
      string(FIND "${causal_cpu_flags}" " ${flag} " at)
      if(at EQUAL -1)
        list(APPEND missing ${flag})
      endif()
    endforeach()
  endif()
  if(missing)
    message(STATUS "numerics: ${setting} not registered, this CPU lacks ${missing}")
    continue()
  endif()
  foreach(threads 1 2)
    set(entries ${causal_numerics_entries})
    if("${setting} threads=${threads}" IN_LIST causal_numerics_slow_kernels)
      list(APPEND entries ${causal_numerics_slow_entries})
    endif()
    foreach(entry ${entries})
      string(REGEX REPLACE "=.*" "" label "${entry}")
      string(REGEX REPLACE "^[^=]*=" "" spec "${entry}")
      # Entries go to a CTest script (as catch_discover_tests writes its own) so that their names may hold
      # spaces without CMP0110. A Catch warning inside a test is indented: only the binary's own
      # first-column "SKIPPED: " line skips an entry.
      set(name "numerics: ${label} ${setting} threads=${threads}")
      string(APPEND causal_numerics_script
        "add_test([=[${name}]=] [=[$<TARGET_FILE:causal_tests>]=] [=[${spec}]=] -w NoTests)\n"
        "set_tests_properties([=[${name}]=] PROPERTIES LABELS numerics TIMEOUT 600\n"
        "  WORKING_DIRECTORY [=[${CMAKE_SOURCE_DIR}]=] SKIP_REGULAR_EXPRESSION \"(^|\\n)SKIPPED: \"\n"
        "  ENVIRONMENT [=[CAUSAL_CACHE_DIR=${CAUSAL_TEST_CACHE_DIR};CAUSAL_TEST_THREADS=${threads};${setting}]=])\n")
    endforeach()
  endforeach()
endforeach()
file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/numerics_tests.cmake CONTENT "${causal_numerics_script}")
set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${CMAKE_BINARY_DIR}/numerics_tests.cmake)
