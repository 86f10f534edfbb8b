# CUDA and NCCL: optional. With BRIGADE_CUDA=ON (the default) the CUDA device, the
# normalize kernel and the NCCL group are built when the CUDA toolkit is found;
# with OFF, without a toolkit, or in a sanitizer build, the CPU device alone is built
# and everything else configures, builds and passes the same way.
#
# Sets BRIGADE_HAS_CUDA and BRIGADE_HAS_NCCL. The CUDA runtime is linked statically
# (CUDA::cudart_static), so binaries need only the driver; NCCL is loaded at first use
# (transport/device/detail/cuda/nccl.cc) and is found here only for its header and, as the
# last place to look at run time, its build-time path.
option(BRIGADE_CUDA "Build the CUDA device (copy stage, normalize kernel, NCCL) when the toolkit is found" ON)
set(BRIGADE_HAS_CUDA OFF)
set(BRIGADE_HAS_NCCL OFF)

if(BRIGADE_CUDA AND NOT BRIGADE_SANITIZE STREQUAL "")
  message(STATUS "CUDA: off in sanitizer builds (the CPU device is what they check)")
elseif(BRIGADE_CUDA)
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # -DCMAKE_CUDA_ARCHITECTURES or the CUDAARCHS environment variable (which CMake reads
    # in enable_language) win; else A100, H100/H200 and, where nvcc knows them (12.8+),
    # Blackwell B200 (100) and RTX 50xx (120) as SASS, each with its PTX.
    set(brigade_default_archs OFF)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT DEFINED ENV{CUDAARCHS})
      set(brigade_default_archs ON)
    endif()
    # CUDA sources (the kernels alone) are C++17: CMake 3.25 knows no C++20 flag for nvcc.
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    enable_language(CUDA)
    if(brigade_default_archs)
      set(archs "80;90")
      if(CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12.8)
        list(APPEND archs 100 120)
      endif()
      set(CMAKE_CUDA_ARCHITECTURES "${archs}" CACHE STRING "CUDA architectures" FORCE)
    endif()
    find_package(CUDAToolkit)
  endif()
  if(CMAKE_CUDA_COMPILER AND CUDAToolkit_FOUND)
    set(BRIGADE_HAS_CUDA ON)
    if(CCACHE_PROGRAM)
      set(CMAKE_CUDA_COMPILER_LAUNCHER ${CCACHE_PROGRAM})
    endif()
    find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
    if(NCCL_INCLUDE_DIR)
      set(BRIGADE_HAS_NCCL ON)
    endif()
    message(STATUS "CUDA: ${CUDAToolkit_VERSION} (architectures ${CMAKE_CUDA_ARCHITECTURES}); "
                   "NCCL: ${BRIGADE_HAS_NCCL} (${NCCL_INCLUDE_DIR}, ${NCCL_LIBRARY})")
  else()
    message(STATUS "CUDA: toolkit not found; building the CPU device only")
  endif()
else()
  message(STATUS "CUDA: off (-DBRIGADE_CUDA=OFF); building the CPU device only")
endif()

# Cap'n Proto for the self-contained device binaries: the static archives where they
# exist (Debian's libcapnp-dev ships them), else the shared library.
find_library(BRIGADE_CAPNP_STATIC_LIBRARY NAMES libcapnp.a)
find_library(BRIGADE_KJ_STATIC_LIBRARY NAMES libkj.a)
if(BRIGADE_CAPNP_STATIC_LIBRARY AND BRIGADE_KJ_STATIC_LIBRARY)
  set(BRIGADE_CAPNP_FOR_DEVICE_BINARIES ${BRIGADE_CAPNP_STATIC_LIBRARY} ${BRIGADE_KJ_STATIC_LIBRARY}
    Threads::Threads)
else()
  set(BRIGADE_CAPNP_FOR_DEVICE_BINARIES CapnProto::capnp)
endif()

# brigade_add_device_executable(NAME SOURCES ... [LIBS ...])
# A small binary over the device code alone (BRIGADE_DEVICE_OBJECTS from transport/,
# media/tensor.cc and media/normalize.cc compiled in; no CAF, no FFmpeg; Cap'n Proto, the CUDA runtime and
# libstdc++ static), so that it runs on a GPU machine with nothing but the driver: the
# GPU tests and bench_gpu (see bench/gpu_check.sh).
function(brigade_add_device_executable name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES} ${BRIGADE_DEVICE_OBJECTS}
    ${PROJECT_SOURCE_DIR}/media/tensor.cc ${PROJECT_SOURCE_DIR}/media/normalize.cc
    ${PROJECT_SOURCE_DIR}/transport/files/files.cc)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} ${BRIGADE_CAPNP_FOR_DEVICE_BINARIES}
    ${BRIGADE_DEVICE_LINK} brigade_sanitize brigade_warnings)
  if(BRIGADE_SANITIZE STREQUAL "")
    target_link_options(${name} PRIVATE -static-libstdc++ -static-libgcc)
  endif()
endfunction()
