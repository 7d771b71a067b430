# Build options, warning flags and sanitizers shared by every target.

option(VIDFEAT_BUILD_TESTS "Build the test programs" ON)
option(VIDFEAT_WERROR "Treat warnings as errors" OFF)
option(VIDFEAT_FUZZ "Build the libFuzzer targets (needs clang)" OFF)
set(VIDFEAT_SANITIZE "" CACHE STRING "Sanitizers to build with, e.g. address,undefined or thread")

set(VF_WARNINGS -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wvla)
if(VIDFEAT_WERROR)
    list(APPEND VF_WARNINGS -Werror)
endif()

if(VIDFEAT_FUZZ)
    if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
        message(FATAL_ERROR "VIDFEAT_FUZZ=ON needs clang (CC=clang)")
    endif()
    add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer)
    add_link_options(-fsanitize=address,undefined)
endif()

if(VIDFEAT_SANITIZE)
    add_compile_options(-fsanitize=${VIDFEAT_SANITIZE} -fno-omit-frame-pointer
                        -fno-sanitize-recover=all)
    add_link_options(-fsanitize=${VIDFEAT_SANITIZE})
endif()

# vf_target_warnings(target): our warning set on a target's own sources.
function(vf_target_warnings target)
    target_compile_options(${target} PRIVATE ${VF_WARNINGS})
endfunction()
