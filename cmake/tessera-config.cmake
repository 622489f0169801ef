# find_package(tessera): tessera_add_network() for your CMake build
# (tessera.cmake beside this file says how). `tessera --cmake-dir` prints
# this folder: cmake -DCMAKE_PREFIX_PATH=$(tessera --cmake-dir) ...
include("${CMAKE_CURRENT_LIST_DIR}/tessera.cmake")
set(tessera_FOUND TRUE)
