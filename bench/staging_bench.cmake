# staging_bench (bench/staging_bench.cpp): the staging engine's pipeline alone (loop transport in null mode) and
# staged transfers between two processes over tcp. bench/staging_sweep.sh runs the matrix on the GPU machine.
# A diagnostic of an internal component (it drives fb::Engine directly, with the tests' loop transport), not a
# product figure: gdx_perftest --path staged measures staging through gdx_put.
add_executable(staging_bench ${CMAKE_CURRENT_LIST_DIR}/staging_bench.cpp)
target_link_libraries(staging_bench PRIVATE gdx_test_loop gdx_internal)
