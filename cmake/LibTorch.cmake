# Which LibTorch the build uses and how it is linked; the one place that knows (docs/libtorch.md).
#
#   CAUSAL_TORCH_ROOT  a LibTorch prefix with include/, lib/ and share/cmake/Torch: the torch/ folder of
#                      PyPI's wheel (tools/setup.sh passes it) or an unpacked official LibTorch zip.
#                      Empty: find_package(Torch) as usual (Debian's libtorch-dev, or CMAKE_PREFIX_PATH).
#   CAUSAL_CUDA        link LibTorch's CUDA side (torch_cuda, c10_cuda, NCCL). Off, a CPU build of a CUDA
#                      LibTorch links torch_cpu and c10 alone, so the CUDA kernels' libraries never load.
#
# Defines the target causal::torch, CAUSAL_TORCH_VERSION and CAUSAL_TORCH_BLAS (openblas or mkl: the BLAS
# the build's matrix products run on, which the numerics tests vary).

set(CAUSAL_TORCH_ROOT "" CACHE PATH "LibTorch prefix (the PyPI wheel's torch/ folder or an official zip)")
option(CAUSAL_CUDA "Link LibTorch's CUDA libraries (NCCL, CUDA kernels)" OFF)

add_library(causal_torch INTERFACE)
add_library(causal::torch ALIAS causal_torch)

# The wheel and the official zips ship fmt 12 and protobuf headers beside LibTorch's. spdlog from Debian
# is compiled against fmt 9, so those must not shadow the system's: causal sees <root>/include through a
# folder of links without them.
function(causal_torch_include_view root)
  set(view ${CMAKE_BINARY_DIR}/torch-include)
  file(MAKE_DIRECTORY ${view})
  file(GLOB entries RELATIVE ${root}/include ${root}/include/*)
  foreach(entry ${entries})
    if(NOT entry MATCHES "^(fmt|google|pybind11)$" AND NOT EXISTS ${view}/${entry})
      file(CREATE_LINK ${root}/include/${entry} ${view}/${entry} SYMBOLIC)
    endif()
  endforeach()
  target_include_directories(causal_torch SYSTEM INTERFACE ${view} ${view}/torch/csrc/api/include)
endfunction()

# The wheel's libtorch.so and libtorch_cpu.so export their own copies of libstdc++'s std::filesystem (their
# manylinux toolchain links it in statically, unversioned). Loaded ahead of libstdc++, they would take
# causal's own calls, and libtorch.so's fs::remove_all jumps to address 0 (every CUDA build crashed on it).
# libstdc++ first in the executables' needed list wins that lookup; Debian's LibTorch has no such copies.
if(CAUSAL_TORCH_ROOT)
  target_link_libraries(causal_torch INTERFACE stdc++)
endif()

set(torch_has_cuda OFF)
if(CAUSAL_TORCH_ROOT AND NOT CAUSAL_CUDA)
  set(root ${CAUSAL_TORCH_ROOT})
  foreach(required include/torch/csrc/api/include/torch/torch.h lib/libtorch_cpu.so lib/libc10.so
                   share/cmake/Torch/TorchConfigVersion.cmake)
    if(NOT EXISTS ${root}/${required})
      message(FATAL_ERROR "CAUSAL_TORCH_ROOT=${root}: expected a LibTorch prefix, missing ${required}")
    endif()
  endforeach()
  include(${root}/share/cmake/Torch/TorchConfigVersion.cmake)
  set(CAUSAL_TORCH_VERSION ${PACKAGE_VERSION})
  causal_torch_include_view(${root})
  # What torch_cpu's own CMake target gives its users (distributed with Gloo).
  target_compile_definitions(causal_torch INTERFACE USE_DISTRIBUTED USE_C10D_GLOO USE_RPC USE_TENSORPIPE)
  target_link_libraries(causal_torch INTERFACE ${root}/lib/libtorch_cpu.so ${root}/lib/libc10.so)
  set(CAUSAL_TORCH_BLAS mkl)
else()
  if(CAUSAL_TORCH_ROOT)
    # TorchConfig looks for libtorch.so and Caffe2's config in the system folders first, where Debian's
    # 1.13 may be: point both at this prefix.
    find_library(TORCH_LIBRARY torch PATHS ${CAUSAL_TORCH_ROOT}/lib NO_DEFAULT_PATH)
    set(Caffe2_DIR ${CAUSAL_TORCH_ROOT}/share/cmake/Caffe2 CACHE PATH "" FORCE)
    find_package(Torch REQUIRED PATHS ${CAUSAL_TORCH_ROOT}/share/cmake/Torch NO_DEFAULT_PATH)
  else()
    find_package(Torch REQUIRED)
  endif()
  # find_package links a CUDA LibTorch whole, so its CUDA side comes with it whether asked for or not.
  set(torch_has_cuda OFF)
  if(TARGET torch_cuda OR TORCH_CUDA_LIBRARIES)
    set(torch_has_cuda ON)
  elseif(CAUSAL_CUDA)
    message(FATAL_ERROR "CAUSAL_CUDA=ON but the LibTorch found (${TORCH_INSTALL_PREFIX}) has no CUDA")
  endif()
  set(CAUSAL_TORCH_VERSION ${Torch_VERSION})
  # Any LibTorch outside the system folders (the wheel, a zip found through CMAKE_PREFIX_PATH) carries its
  # own fmt: its targets' include folders give way to the view.
  if(NOT TORCH_INSTALL_PREFIX MATCHES "^/usr")
    foreach(target torch torch_cpu torch_cuda c10 c10_cuda headeronly)
      if(TARGET ${target})
        set_target_properties(${target} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "")
      endif()
    endforeach()
    causal_torch_include_view(${TORCH_INSTALL_PREFIX})
  else()
    target_include_directories(causal_torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
  endif()
  if(torch_has_cuda)
    target_compile_definitions(causal_torch INTERFACE
      CAUSAL_CUDA_VERSION="${CUDAToolkit_VERSION_MAJOR}.${CUDAToolkit_VERSION_MINOR}")
  endif()
  target_link_libraries(causal_torch INTERFACE ${TORCH_LIBRARIES})
  # Debian's package is built on OpenBLAS; official x86-64 builds link MKL.
  if(TORCH_INSTALL_PREFIX MATCHES "^/usr")
    set(CAUSAL_TORCH_BLAS openblas)
  else()
    set(CAUSAL_TORCH_BLAS mkl)
  endif()
endif()
message(STATUS "causal: LibTorch ${CAUSAL_TORCH_VERSION}, BLAS ${CAUSAL_TORCH_BLAS}, CUDA linked: ${torch_has_cuda}")
