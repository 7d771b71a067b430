/*
 * path.h - the name a file is recorded under in the database; vidfeat's cache directory.
 */
#ifndef VIDFEAT_PATH_H
#define VIDFEAT_PATH_H

#include <stdio.h>

#include "core/status.h"

/* path made absolute (the current directory prefixed to a relative one) with empty and "."
 * components dropped, so "clip.mp4", "./clip.mp4" and "$PWD//clip.mp4" give one name. ".." is
 * kept: without asking the file system, "link/.." cannot be told from its parent. A relative
 * path stays relative (tidied) when the current directory cannot be read (removed, or not
 * searchable). A new string (vfi_free); NULL only when out of memory or path is NULL or "". */
char *vfi_path_absolute(const char *path);

/* $XDG_CACHE_HOME/vidfeat/name, else $HOME/.cache/vidfeat/name (absolute variables only): a new
 * string (vfi_free), or NULL when neither is set or out of memory. The directory may not exist. */
char *vfi_cache_path(const char *name);

/* mkdir -p of the directory path is in (mode 0755). Failures are left for whoever then writes
 * the file to report. */
void vfi_make_parent_dirs(const char *path);

/* Replacing a file so that a reader sees its old contents or the new, never a part: write to *f,
 * a temporary file beside path (PATH.tmpPID) that vfi_replace_open makes, then
 * vfi_replace_close closes it and renames it over path - or, when writing it failed, removes
 * it. Both return VF_ERR_IO with the failing name and the system's reason (VF_ERR_NOMEM when out
 * of memory); vfi_replace_close always closes f and frees tmp. */
vf_status vfi_replace_open(const char *path, FILE **f, char **tmp, vf_err *err);
vf_status vfi_replace_close(FILE *f, char *tmp, const char *path, vf_err *err);

#endif /* VIDFEAT_PATH_H */
