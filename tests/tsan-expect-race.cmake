# cmake -DBINARY=<program> -DFRAME=<function> -P tsan-expect-race.cmake
# Passes only if the program exits non-zero with a ThreadSanitizer data race report that
# names FRAME (tests/CMakeLists.txt, brigade_expect_tsan_race).
execute_process(COMMAND ${BINARY} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(all "${out}${err}")
message("${all}")
if(rc EQUAL 0)
  message(FATAL_ERROR "${BINARY} exited 0: ThreadSanitizer did not report its data race")
endif()
string(FIND "${all}" "WARNING: ThreadSanitizer: data race" race_at)
string(FIND "${all}" "${FRAME}" frame_at)
if(race_at EQUAL -1 OR frame_at EQUAL -1)
  message(FATAL_ERROR "${BINARY} exited ${rc} without a data race report naming ${FRAME}")
endif()
message(STATUS "ThreadSanitizer reported the data race in ${FRAME} (exit ${rc}), as it must")
