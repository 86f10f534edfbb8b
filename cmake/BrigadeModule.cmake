# Warning flags and sanitizer flags live in one PRIVATE interface target.
add_library(brigade_warnings INTERFACE)
target_compile_options(brigade_warnings INTERFACE -Wall -Wextra -Wpedantic
  $<$<BOOL:${BRIGADE_WERROR}>:-Werror>)
# GCC 12 at -O3 reports -Wrestrict inside libstdc++'s std::string for ordinary
# concatenations ("literal" + std::string), a known false positive (GCC bug 105329,
# fixed in GCC 13): it is not our code's, and rewriting every concatenation would not
# make it safer.
# In a unity build (scripts/test.sh) each source is #included into a batch file, so GCC
# takes it for a header and reports every class with a member of an internal type
# (pimpl Impl holding an anonymous-namespace struct) as an ODR hazard across translation
# units. There is one definition site all the same; the ordinary build keeps the check.
if(CMAKE_UNITY_BUILD AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  target_compile_options(brigade_warnings INTERFACE -Wno-subobject-linkage)
endif()
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(brigade_warnings INTERFACE -Wno-restrict)
endif()

add_library(brigade_sanitize INTERFACE)
if(BRIGADE_SANITIZE STREQUAL "thread")
  target_compile_options(brigade_sanitize INTERFACE -fsanitize=thread -fno-omit-frame-pointer)
  target_link_options(brigade_sanitize INTERFACE -fsanitize=thread)
elseif(BRIGADE_SANITIZE STREQUAL "address")
  target_compile_options(brigade_sanitize INTERFACE -fsanitize=address,undefined
    -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  target_link_options(brigade_sanitize INTERFACE -fsanitize=address,undefined)
elseif(NOT BRIGADE_SANITIZE STREQUAL "")
  message(FATAL_ERROR "BRIGADE_SANITIZE must be '', 'thread' or 'address'")
endif()

# brigade_add_module(NAME SOURCES ... [PUBLIC_DEPS ...] [PRIVATE_DEPS ...])
# Makes the library brigade_<NAME>; public headers are included as "<module>/x.h".
function(brigade_add_module name)
  cmake_parse_arguments(ARG "" "" "SOURCES;PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(brigade_${name} ${ARG_SOURCES})
  # Installed: the headers under include/brigade (cmake/BrigadeInstall.cmake).
  target_include_directories(brigade_${name} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
    $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}> $<INSTALL_INTERFACE:include/brigade>)
  set_target_properties(brigade_${name} PROPERTIES EXPORT_NAME ${name})
  target_link_libraries(brigade_${name} PUBLIC ${ARG_PUBLIC_DEPS} brigade_sanitize
    PRIVATE ${ARG_PRIVATE_DEPS} brigade_warnings)
endfunction()

# brigade_add_tests(MODULE [NAME BINARY] SOURCES ... [DEPS ...] [LABELS ...])
# Makes the test binary <MODULE>_tests (or BINARY: a second binary of the module's tests)
# from one file per unit, linked with brigade_<MODULE>, and registers every TEST with
# CTest (gtest_discover_tests), labelled with the module's name and LABELS.
function(brigade_add_tests module)
  cmake_parse_arguments(ARG "" "NAME" "SOURCES;DEPS;LABELS" ${ARGN})
  if(NOT ARG_NAME)
    set(ARG_NAME ${module}_tests)
  endif()
  add_executable(${ARG_NAME} ${ARG_SOURCES})
  target_link_libraries(${ARG_NAME} PRIVATE brigade_${module} ${ARG_DEPS}
    GTest::gtest GTest::gtest_main brigade_warnings)
  gtest_discover_tests(${ARG_NAME} DISCOVERY_TIMEOUT 60)
  brigade_test_labels(${ARG_NAME} ${module} ${ARG_LABELS})
endfunction()

# brigade_test_labels(TARGET LABEL...): labels every test that gtest_discover_tests found
# in TARGET (call it in the same directory, after gtest_discover_tests). Not through
# gtest_discover_tests' PROPERTIES, which splits a list into words (LABELS a b sets only
# a): a script that CTest reads after the discovered tests sets them. The label `tsan`
# also makes the ThreadSanitizer build build and run TARGET (tests/CMakeLists.txt).
function(brigade_test_labels target)
  set(script ${CMAKE_CURRENT_BINARY_DIR}/${target}_labels.cmake)
  file(WRITE ${script} "if(${target}_TESTS)\n  set_tests_properties("
    "\${${target}_TESTS} PROPERTIES LABELS \"${ARGN}\")\nendif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${script})
  if("tsan" IN_LIST ARGN)
    set_property(GLOBAL APPEND PROPERTY BRIGADE_TSAN_TARGETS ${target})
  endif()
endfunction()

# brigade_add_bench(NAME SOURCES ... DEPS ...): one executable per benchmark.
function(brigade_add_bench name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} brigade_warnings)
endfunction()
