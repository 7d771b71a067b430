/*
 * log.h - vfi_log() is the only way library code prints (STYLE 2.9).
 */
#ifndef VIDFEAT_LOG_H
#define VIDFEAT_LOG_H

#include "vidfeat.h"

/* Log one line: lower case, no trailing period or newline; tag names the module. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
void vfi_log(int level, const char *tag, const char *fmt, ...);

#endif /* VIDFEAT_LOG_H */
