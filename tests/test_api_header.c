/*
 * test_api_header.c - vidfeat.h must compile on its own as strict C99 (-std=c99 -pedantic
 * -Werror) and as C++ (test_api_header.cpp includes this file): the public header depends on
 * nothing but the C standard library and has working extern "C" guards.
 */
#include "vidfeat.h"

int main(void)
{
    vf_config cfg = vf_config_default();
    vf_model_info info;
    info.feature_dim = cfg.batch_size;
    return vf_status_str(VF_OK)[0] == 'o' && info.feature_dim == 32 ? 0 : 1;
}
