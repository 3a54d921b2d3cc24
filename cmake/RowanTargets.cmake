# Helpers shared by every rowan target.

# rowan_project_options(TARGET): warnings (errors with ROWAN_WERROR) and
# sanitizers, applied to the project's own targets only (never to third-party
# code).
function(rowan_project_options target)
  target_compile_options(${target} PRIVATE
    -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast
    -Wcast-align -Wimplicit-fallthrough)
  if(ROWAN_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  if(ROWAN_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=${ROWAN_SANITIZE} -fno-omit-frame-pointer
                                             -fno-sanitize-recover=all)
    target_link_options(${target} PRIVATE -fsanitize=${ROWAN_SANITIZE})
  endif()
  if(ROWAN_BUILD_FUZZ)
    # Coverage feedback from every project target, not just the fuzz entry points.
    target_compile_options(${target} PRIVATE -fsanitize=fuzzer-no-link)
  endif()
endfunction()

# DPDK's headers do not pass -Wpedantic/-Wold-style-cast; targets that include
# them relax exactly those two warnings.
function(rowan_dpdk_options target)
  target_compile_options(${target} PRIVATE -Wno-pedantic -Wno-old-style-cast -Wno-cast-align)
  target_link_libraries(${target} PRIVATE PkgConfig::DPDK)
endfunction()

# rowan_add_test(NAME SOURCES ... LABELS unit|sim|integration|interop [LIBS ...] [TIMEOUT s]
#                [PROPERTIES key value ...])   # extra ctest properties, e.g. RESOURCE_LOCK testbed
# Builds a GoogleTest binary and registers each of its tests with ctest under
# the given labels.
function(rowan_add_test name)
  if(NOT ROWAN_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LABELS;LIBS;PROPERTIES" ${ARGN})
  if(NOT T_LABELS)
    message(FATAL_ERROR "rowan_add_test(${name}) needs LABELS")
  endif()
  foreach(label IN LISTS T_LABELS)
    if(NOT label MATCHES "^(unit|sim|integration|interop|fuzz)$")
      message(FATAL_ERROR "rowan_add_test(${name}): unknown label '${label}'")
    endif()
  endforeach()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  add_executable(${name} ${T_SOURCES})
  rowan_project_options(${name})
  target_link_libraries(${name} PRIVATE rowan_test_tools GTest::gtest GTest::gtest_main ${T_LIBS})
  gtest_discover_tests(${name}
    PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT} ${T_PROPERTIES}
    ENVIRONMENT "ROWAN_SOURCE_DIR=${PROJECT_SOURCE_DIR};ROWAN_BINARY_DIR=${PROJECT_BINARY_DIR}"
    DISCOVERY_TIMEOUT 60)
endfunction()

# rowan_add_fuzzer(NAME SOURCES ... LIBS ... CORPUS dir SECONDS n)
# A libFuzzer target; registered as a ctest test labelled `fuzz` that runs for a
# bounded time over its seed corpus.
function(rowan_add_fuzzer name)
  cmake_parse_arguments(F "" "CORPUS;SECONDS" "SOURCES;LIBS" ${ARGN})
  if(NOT F_SECONDS)
    set(F_SECONDS 30)
  endif()
  add_executable(${name} ${F_SOURCES})
  rowan_project_options(${name})
  target_compile_options(${name} PRIVATE -fsanitize=fuzzer)
  target_link_options(${name} PRIVATE -fsanitize=fuzzer)
  target_link_libraries(${name} PRIVATE ${F_LIBS})
  set(work ${CMAKE_CURRENT_BINARY_DIR}/${name}.corpus)
  add_test(NAME ${name}
    COMMAND ${CMAKE_COMMAND} -E env ASAN_OPTIONS=detect_leaks=1
            UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
            sh -c "mkdir -p '${work}' && exec \"$0\" -max_total_time=${F_SECONDS} -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix='${CMAKE_CURRENT_BINARY_DIR}/${name}-' '${work}' '${F_CORPUS}'"
            $<TARGET_FILE:${name}>)
  set_tests_properties(${name} PROPERTIES LABELS fuzz TIMEOUT ${F_SECONDS}0)
endfunction()
