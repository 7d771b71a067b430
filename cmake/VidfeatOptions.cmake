# Build options, warning flags and sanitizers shared by every target.

option(VIDFEAT_BUILD_TESTS "Build the test programs" ON)
option(VIDFEAT_WERROR "Treat warnings as errors" OFF)
option(VIDFEAT_FUZZ "Build the libFuzzer targets (needs clang)" OFF)
set(VIDFEAT_SANITIZE "" CACHE STRING "Sanitizers to build with, e.g. address,undefined or thread")

set(VF_WARNINGS -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wvla)
set(VF_CXX_WARNINGS -Wall -Wextra -Wshadow)
if(VIDFEAT_WERROR)
    list(APPEND VF_WARNINGS -Werror)
    list(APPEND VF_CXX_WARNINGS -Werror)
endif()

if(VIDFEAT_FUZZ)
    if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
        message(FATAL_ERROR "VIDFEAT_FUZZ=ON needs clang (CC=clang)")
    endif()
    add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer)
    add_link_options(-fsanitize=address,undefined)
endif()

if(VIDFEAT_SANITIZE)
    # C and C++ only: nvcc does not take these (the CUDA kernels are not instrumented).
    add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=${VIDFEAT_SANITIZE}>"
                        "$<$<COMPILE_LANGUAGE:C,CXX>:-fno-omit-frame-pointer>"
                        "$<$<COMPILE_LANGUAGE:C,CXX>:-fno-sanitize-recover=all>")
    add_link_options(-fsanitize=${VIDFEAT_SANITIZE})
endif()

# vf_target_warnings(target): our warning set on a target's own C sources (CUDA sources get
# nvcc's own warnings as errors under VIDFEAT_WERROR).
function(vf_target_warnings target)
    target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:C>:${VF_WARNINGS}>")
    target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:${VF_CXX_WARNINGS}>")
    if(VIDFEAT_WERROR)
        target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings>")
    endif()
endfunction()
