# Every dependency comes from Debian 12's packages (scripts/install-deps.sh).
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)

# CAF 0.17.6 ships no CMake config and no .pc file: find it by hand. Targets caf::core,
# caf::io and caf::openssl. BRIGADE_CAF_ROOT replaces Debian's CAF entirely (headers and
# all three libraries) by another install of 0.17.6, in practice the one built with
# -fsanitize=thread by scripts/build-caf-tsan.sh for the ThreadSanitizer build; binaries
# then carry <root>/lib in their RPATH, and the libraries find each other through
# $ORIGIN, so no process mixes the two builds (tests/CMakeLists.txt checks each TSan test
# binary with ldd).
set(BRIGADE_CAF_ROOT "" CACHE PATH
  "Prefix of a CAF 0.17.6 install (include/, lib/) to use instead of the system's")
if(BRIGADE_CAF_ROOT)
  set(CAF_INCLUDE_DIR ${BRIGADE_CAF_ROOT}/include)
  if(NOT EXISTS ${CAF_INCLUDE_DIR}/caf/all.hpp)
    message(FATAL_ERROR "BRIGADE_CAF_ROOT=${BRIGADE_CAF_ROOT} has no CAF headers "
      "(${CAF_INCLUDE_DIR}/caf/all.hpp); scripts/build-caf-tsan.sh prints a valid prefix")
  endif()
  foreach(component core io openssl)
    string(TOUPPER ${component} upper)
    set(lib ${BRIGADE_CAF_ROOT}/lib/libcaf_${component}.so)
    if(NOT EXISTS ${lib})
      message(FATAL_ERROR "BRIGADE_CAF_ROOT=${BRIGADE_CAF_ROOT} lacks libcaf_${component} "
        "(${lib}); scripts/build-caf-tsan.sh builds core, io and openssl")
    endif()
    # A TSan-instrumented libcaf calls into libtsan: it works only in a TSan build, and
    # a TSan build wants nothing else (uninstrumented CAF hides races between actors).
    execute_process(COMMAND ${CMAKE_NM} -D ${lib} OUTPUT_VARIABLE symbols
      RESULT_VARIABLE nm_result)
    if(NOT nm_result EQUAL 0)
      message(FATAL_ERROR "${CMAKE_NM} -D ${lib} failed: cannot tell how it was built")
    endif()
    string(FIND "${symbols}" " U __tsan_func_entry" tsan_at)
    if(BRIGADE_SANITIZE STREQUAL "thread" AND tsan_at EQUAL -1)
      message(FATAL_ERROR "${lib} is not built with -fsanitize=thread; the TSan build "
        "needs instrumented CAF (scripts/build-caf-tsan.sh)")
    elseif(NOT BRIGADE_SANITIZE STREQUAL "thread" AND NOT tsan_at EQUAL -1)
      message(FATAL_ERROR "${lib} is built with -fsanitize=thread: use it only with "
        "-DBRIGADE_SANITIZE=thread")
    endif()
    set(CAF_${upper}_LIBRARY ${lib})
  endforeach()
  list(APPEND CMAKE_BUILD_RPATH ${BRIGADE_CAF_ROOT}/lib)
  message(STATUS "CAF from BRIGADE_CAF_ROOT: ${BRIGADE_CAF_ROOT}")
else()
  find_path(CAF_INCLUDE_DIR caf/all.hpp REQUIRED)
  find_library(CAF_CORE_LIBRARY caf_core REQUIRED)
  find_library(CAF_IO_LIBRARY caf_io REQUIRED)
  find_library(CAF_OPENSSL_LIBRARY caf_openssl REQUIRED)
  if(BRIGADE_SANITIZE STREQUAL "thread")
    message(WARNING "ThreadSanitizer with the system's uninstrumented CAF reports false "
      "races on every hand-off through CAF and cannot check races between actors: pass "
      "-DBRIGADE_CAF_ROOT=$(scripts/build-caf-tsan.sh) (README, Sanitizers)")
  endif()
endif()
# The headers come from the same install as the libraries (an imported target's include
# directories are passed as -isystem; /usr/include, being implicit, is not passed at all).
add_library(caf::core UNKNOWN IMPORTED)
set_target_properties(caf::core PROPERTIES IMPORTED_LOCATION ${CAF_CORE_LIBRARY}
  INTERFACE_INCLUDE_DIRECTORIES ${CAF_INCLUDE_DIR}
  INTERFACE_LINK_LIBRARIES Threads::Threads)
add_library(caf::io UNKNOWN IMPORTED)
set_target_properties(caf::io PROPERTIES IMPORTED_LOCATION ${CAF_IO_LIBRARY}
  INTERFACE_LINK_LIBRARIES caf::core)
# CAF's OpenSSL module: its headers include OpenSSL's.
find_package(OpenSSL REQUIRED)
add_library(caf::openssl UNKNOWN IMPORTED)
set_target_properties(caf::openssl PROPERTIES IMPORTED_LOCATION ${CAF_OPENSSL_LIBRARY}
  INTERFACE_LINK_LIBRARIES "caf::io;OpenSSL::SSL;OpenSSL::Crypto")

find_package(spdlog CONFIG REQUIRED)
find_package(CapnProto CONFIG REQUIRED)
pkg_check_modules(FFMPEG REQUIRED IMPORTED_TARGET
  libavformat libavcodec libavfilter libswscale libswresample libavutil)
pkg_check_modules(TURBOJPEG REQUIRED IMPORTED_TARGET libturbojpeg)
# libjpeg-turbo's libjpeg API: region-of-interest decoding (TurboJPEG 2.1 cannot crop).
pkg_check_modules(LIBJPEG REQUIRED IMPORTED_TARGET libjpeg)
find_package(ZLIB REQUIRED)
# Manifests (launch/loader/manifest.cc): libcsv (CSV/TSV: quoting, embedded newlines) and
# simdjson (JSON Lines). libcsv ships neither a .pc file nor a CMake config.
find_path(CSV_INCLUDE_DIR csv.h REQUIRED)
find_library(CSV_LIBRARY csv REQUIRED)
add_library(csv::csv UNKNOWN IMPORTED)
set_target_properties(csv::csv PROPERTIES IMPORTED_LOCATION ${CSV_LIBRARY}
  INTERFACE_INCLUDE_DIRECTORIES ${CSV_INCLUDE_DIR})
find_package(simdjson CONFIG REQUIRED)
# Tar shards (launch/loader/shards.h): libarchive reads their headers (ustar, pax, GNU);
# nlohmann-json their .json members (header-only).
pkg_check_modules(LIBARCHIVE REQUIRED IMPORTED_TARGET libarchive)
find_package(nlohmann_json CONFIG REQUIRED)
if(BRIGADE_BUILD_TESTS)
  find_package(GTest CONFIG REQUIRED)
  include(GoogleTest)
endif()
