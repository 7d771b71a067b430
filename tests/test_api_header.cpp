// test_api_header.cpp - the public header compiled as C++ (the extern "C" guards), linked
// against the C library.
#include "test_api_header.c"
