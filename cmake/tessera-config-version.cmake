# The version of the tessera package this folder belongs to (its
# tessera/util/version.py), for find_package(tessera <version>).
foreach(_tsr_version_file "${CMAKE_CURRENT_LIST_DIR}/../../util/version.py"
                          "${CMAKE_CURRENT_LIST_DIR}/../site_scons/tessera/util/version.py")
  if(EXISTS "${_tsr_version_file}")
    file(STRINGS "${_tsr_version_file}" _tsr_version_line REGEX "^__version__ *= *\"")
    string(REGEX REPLACE "^__version__ *= *\"([^\"]*)\".*" "\\1" PACKAGE_VERSION "${_tsr_version_line}")
    break()
  endif()
endforeach()
if(PACKAGE_FIND_VERSION AND PACKAGE_VERSION VERSION_LESS PACKAGE_FIND_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
else()
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
  if(PACKAGE_FIND_VERSION STREQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
endif()
