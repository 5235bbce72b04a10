# gdx_add_gtest(<name> SOURCES <files...> [LABELS <labels...>] [LIBS <libs...>] [TIMEOUT <s>])
# One GoogleTest executable, each test case registered with ctest (skips are reported as skipped).
function(gdx_add_gtest name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LABELS;LIBS" ${ARGN})
  if(NOT T_LABELS)
    set(T_LABELS cpu)
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE gdx_internal gdx_test_support GTest::gtest GTest::gtest_main ${T_LIBS})
  target_compile_definitions(${name} PRIVATE GDX_TEST_BINARY_DIR="${CMAKE_BINARY_DIR}"
                                             GDX_TEST_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60
    PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT})
endfunction()
