/*
 * html.h - HTML character references resolved as Python's html.unescape() does it (CLIP's
 * tokenizer runs it on every text, twice): "&amp;", "&eacute;", "&#233;", "&#xE9;", the
 * references HTML accepts without their ';' ("&amp" and, in "&ampx", the "&amp"), numbers HTML
 * reads as other characters (&#150; is U+2013, &#0; U+FFFD) or drops (&#1;), anything else left
 * as written. The names come from html_entities.h (generated from Python's own tables).
 */
#ifndef VIDFEAT_HTML_H
#define VIDFEAT_HTML_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

/* in (n code points) with its character references resolved, into a new array *out (*n_out, never
 * more than n; vfi_free it). VF_ERR_NOMEM only. */
vf_status vfi_html_unescape(const uint32_t *in, size_t n, uint32_t **out, size_t *n_out,
                            vf_err *err);

#endif /* VIDFEAT_HTML_H */
