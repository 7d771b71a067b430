# FindCUDNN: cuDNN's header and library, next to the CUDA toolkit or in the system paths.
# Defines CUDNN_FOUND, CUDNN_VERSION and the imported target CUDNN::cudnn.

find_path(CUDNN_INCLUDE_DIR cudnn.h
    HINTS ${CUDNN_ROOT} ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_ROOT}
    PATH_SUFFIXES include)
find_library(CUDNN_LIBRARY cudnn
    HINTS ${CUDNN_ROOT} ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}
    PATH_SUFFIXES lib64 lib)

if(CUDNN_INCLUDE_DIR AND EXISTS "${CUDNN_INCLUDE_DIR}/cudnn_version.h")
    file(STRINGS "${CUDNN_INCLUDE_DIR}/cudnn_version.h" _vf_cudnn_lines
         REGEX "^#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) +[0-9]+")
    foreach(_part MAJOR MINOR PATCHLEVEL)
        string(REGEX MATCH "CUDNN_${_part} +([0-9]+)" _m "${_vf_cudnn_lines}")
        set(_vf_cudnn_${_part} "${CMAKE_MATCH_1}")
    endforeach()
    set(CUDNN_VERSION "${_vf_cudnn_MAJOR}.${_vf_cudnn_MINOR}.${_vf_cudnn_PATCHLEVEL}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CUDNN REQUIRED_VARS CUDNN_LIBRARY CUDNN_INCLUDE_DIR
                                  VERSION_VAR CUDNN_VERSION)
if(CUDNN_FOUND AND NOT TARGET CUDNN::cudnn)
    add_library(CUDNN::cudnn UNKNOWN IMPORTED)
    set_target_properties(CUDNN::cudnn PROPERTIES
        IMPORTED_LOCATION "${CUDNN_LIBRARY}"
        INTERFACE_INCLUDE_DIRECTORIES "${CUDNN_INCLUDE_DIR}")
endif()
mark_as_advanced(CUDNN_INCLUDE_DIR CUDNN_LIBRARY)
