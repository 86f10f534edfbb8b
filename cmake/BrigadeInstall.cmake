# The C++ package (issue 11): `cmake --install build --prefix P` installs
#   P/lib/libbrigade_{actors,tensor,media,files,checkpoint,remote,device,storage,loader,launch}.a
#                                                         static, position-independent
#   P/lib/libbrigade_media_ffmpeg.so                      media's FFmpeg plugin (dlopen)
#   P/include/brigade/<room>/*.h                          public headers only
#   P/lib/cmake/Brigade/BrigadeConfig.cmake (+ version)   imported targets Brigade::actors,
#                                                         Brigade::media, Brigade::checkpoint,
#                                                         Brigade::remote, Brigade::device,
#                                                         Brigade::transport (the three),
#                                                         Brigade::loader, Brigade::launch
#   P/lib/pkgconfig/brigade.pc                            `pkg-config --cflags --libs brigade`
#
# HEADERS. The public headers (each module's top level) include no FFmpeg, CAF, Cap'n
# Proto, spdlog or CUDA header, so none of those is installed or needed to compile
# against Brigade; tests/package checks it by compiling every installed header alone.
# transport/wire/ (brigade_wire: reading untrusted Cap'n Proto bytes) is internal and not
# installed at all: header-only, its header names Cap'n Proto types, and the rooms that
# use it (remote, loader) link it as $<BUILD_INTERFACE:brigade_wire>, so the exported
# targets do not name it.
# The one exception to "no detail/": actors/pipeline.h is a template over
# actors/detail/{any_value,builder,engine,spec}.h, which are installed with it (they
# include only the standard library and actors/).
#
# DEPENDENCIES. The libraries are static, so a program linking them links their
# dependencies too: BrigadeConfig.cmake finds them (find_dependency: Threads, CapnProto,
# spdlog, ZLIB, OpenSSL, CUDAToolkit when built with CUDA; pkg-config: libturbojpeg,
# libjpeg; FFmpeg only at run time, through the plugin; CAF by hand, as
# cmake/BrigadeDependencies.cmake does, since CAF 0.17
# ships no CMake package) for the link only; brigade.pc lists them in Requires (their
# .pc files) and Libs (CAF, CUDA's static runtime): plain, not .private, because the
# dependencies are shared libraries and `pkg-config --static` would ask for their
# own static dependencies, which Debian does not install. Only the modules' own targets are exported; the build's warning and
# sanitizer interface targets are exported empty of meaning for users (Brigade::warnings
# carries no usage requirement, it is LINK_ONLY).
#
# A link dependency added to a module must be added to BrigadeConfig.cmake.in and
# brigade.pc.in too: CTest package.install_and_consume fails until it is.
#
# Installed only from a full build (every module) without sanitizers.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
set(brigade_all_modules actors media transport launch)
foreach(module IN LISTS brigade_all_modules)
  if(NOT module IN_LIST BRIGADE_MODULES)
    message(STATUS "install: off (BRIGADE_MODULES lacks ${module})")
    return()
  endif()
endforeach()
if(NOT BRIGADE_SANITIZE STREQUAL "")
  return()
endif()

set(BRIGADE_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Brigade)
set(brigade_export_targets brigade_actors brigade_tensor brigade_media brigade_files brigade_checkpoint
  brigade_remote brigade_device brigade_storage brigade_transport brigade_loader brigade_launch
  brigade_warnings brigade_sanitize)
set_target_properties(brigade_warnings PROPERTIES EXPORT_NAME detail_warnings)
set_target_properties(brigade_sanitize PROPERTIES EXPORT_NAME detail_sanitize)
if(TARGET brigade_device_kernels)
  set_target_properties(brigade_device_kernels PROPERTIES EXPORT_NAME detail_device_kernels)
  list(APPEND brigade_export_targets brigade_device_kernels)
endif()
install(TARGETS ${brigade_export_targets} EXPORT BrigadeTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/brigade)
install(EXPORT BrigadeTargets NAMESPACE Brigade:: DESTINATION ${BRIGADE_CMAKE_DIR})
# media's FFmpeg plugin, loaded at run time (media/detail/plugin.h): found next to a
# program, in ../lib from it, or through the RUNPATH that BrigadeConfig.cmake and brigade.pc
# give programs linked against the package.
install(TARGETS brigade_media_ffmpeg LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})

# Each room's public headers: a module's top level, and the rooms inside transport/ and
# launch/ (DESIGN.md, section 1); not transport/wire/ (internal, above).
foreach(room IN ITEMS actors media transport/files transport/checkpoint transport/remote
    transport/device transport/storage
    launch launch/loader)
  file(GLOB headers ${PROJECT_SOURCE_DIR}/${room}/*.h)
  install(FILES ${headers} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/brigade/${room})
endforeach()
# The headers' names before the rooms (issue 20), kept for users' includes: each says
# where its header went (a compiler warning) and includes it.
foreach(moved IN ITEMS transport/checkpoint/checkpoint transport/remote/remote
    transport/remote/endpoint transport/device/device transport/device/device_copy
    transport/device/device_group transport/device/device_normalize
    transport/device/device_pool launch/loader/job launch/loader/decode
    launch/loader/remote_ops launch/loader/demo_dataset)
  get_filename_component(name ${moved} NAME)
  string(REGEX REPLACE "/[a-z_]+/[a-z_]+$" "" module ${moved})
  set(forward ${PROJECT_BINARY_DIR}/deprecated-headers/${module}/${name}.h)
  file(WRITE ${forward} "#pragma once\n#pragma GCC warning \"${module}/${name}.h is deprecated: include ${moved}.h\"\n#include \"${moved}.h\"\n")
  install(FILES ${forward} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/brigade/${module})
endforeach()
install(FILES
  ${PROJECT_SOURCE_DIR}/actors/detail/any_value.h
  ${PROJECT_SOURCE_DIR}/actors/detail/builder.h
  ${PROJECT_SOURCE_DIR}/actors/detail/engine.h
  ${PROJECT_SOURCE_DIR}/actors/detail/spec.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/brigade/actors/detail)

# BrigadeConfig.cmake: what the static libraries need at link time.
set(BRIGADE_CONFIG_HAS_CUDA ${BRIGADE_HAS_CUDA})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/BrigadeConfig.cmake.in
  ${PROJECT_BINARY_DIR}/BrigadeConfig.cmake INSTALL_DESTINATION ${BRIGADE_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/BrigadeConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/BrigadeConfig.cmake
  ${PROJECT_BINARY_DIR}/BrigadeConfigVersion.cmake DESTINATION ${BRIGADE_CMAKE_DIR})

# brigade.pc
set(BRIGADE_PC_LIBS "-lcaf_openssl -lcaf_io -lcaf_core")
if(BRIGADE_HAS_CUDA)
  string(APPEND BRIGADE_PC_LIBS
    " -L${CUDAToolkit_LIBRARY_DIR} -lcudart_static -ldl -lrt")
  set(BRIGADE_PC_KERNELS " -lbrigade_device_kernels")
endif()
string(APPEND BRIGADE_PC_LIBS " -pthread")
configure_file(${CMAKE_CURRENT_LIST_DIR}/brigade.pc.in ${PROJECT_BINARY_DIR}/brigade.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/brigade.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
