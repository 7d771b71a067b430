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

/* path as it reads, with ".." resolved without asking the file system: vfi_path_absolute, then
 * each ".." drops the component before it ("/a/b/../c" -> "/a/c"; "/.." is "/"). A new string
 * (vfi_free); NULL only when out of memory or path is NULL or "". */
char *vfi_path_lexical(const char *path);

/* Does path (absolute, tidied) name dir itself or something under it? Both tidied. */
int vfi_path_within(const char *path, const char *dir);

/* Has path a ".." component? */
int vfi_path_has_dotdot(const char *path);

/*
 * The archive an input may read in (docs/archives.md "What vidfeat reads"): a directory, known both
 * as its name reads (lexical) and as the file system resolves it (real: every link followed). A
 * file is inside when the file system resolves it under real; with links_outside, also when
 * its name reads under lexical (a link inside may then lead anywhere). A file that does not
 * exist is inside when its name reads so.
 */
typedef struct vf_archive {
    char *lexical;     /* vfi_path_lexical of the directory */
    char *real;        /* realpath(3) of it; NULL when it does not exist */
    int links_outside; /* links inside may lead out */
} vf_archive;

/* a for the directory dir; VF_ERR_NOMEM (err) when out of memory. vfi_archive_clear frees. */
vf_status vfi_archive_init(vf_archive *a, const char *dir, int links_outside, vf_err *err);
void vfi_archive_clear(vf_archive *a);
/* Is path inside a (see vf_archive)? 1 inside, 0 outside, -1 out of memory. real (may be NULL)
 * gets path as the file system resolves it (a new string), NULL when it does not exist. */
int vfi_archive_holds(const vf_archive *a, const char *path, char **real);

/* path, when inside a, opened with open(2)'s flags (O_RDONLY, O_NONBLOCK, ...) into *fd: the name
 * resolved and checked as vfi_archive_holds does, then that resolved name opened beneath the
 * archive's directory following no link at all, so a link swapped in after the check (a
 * directory or the file exchanged for a link out) makes the open fail (ELOOP) instead of
 * leading out; reading the descriptor, never the name again, reads what was checked. Outside
 * through a link links_outside allows: the resolved name, opened as it is. 1 opened; 0 outside
 * (*fd -1); -1 with errno (ENOENT, ELOOP, EACCES, ENOMEM, ...). */
int vfi_archive_open(const vf_archive *a, const char *path, int flags, int *fd);

/* $XDG_CACHE_HOME/vidfeat/name, else $HOME/.cache/vidfeat/name (absolute variables only): a new
 * string (vfi_free), or NULL when neither is set or out of memory. The directory may not exist. */
char *vfi_cache_path(const char *name);

/* Where an installed file is when the installation may have been moved: rel_lib (relative to
 * the directory of libvidfeat.so) when vidfeat's code runs from the shared library, rel_bin
 * (relative to the program's directory) when a program holds it (libvidfeat.a), resolved
 * (realpath) into buf. 1 on success, 0 when the code's file cannot be told, the directory does
 * not exist or its name does not fit (buf is then ""). Uses no vfi_malloc: its failure is no
 * error of the caller's. */
int vfi_installed_path(const char *rel_lib, const char *rel_bin, char *buf, size_t size);

/* 1 when vidfeat's code runs from a file under dir (the build tree: its source and build
 * directories are places to look; an installed copy never looks there), else 0. */
int vfi_running_under(const char *dir);

/* mkdir -p of the directory path is in (mode 0755). Failures are left for whoever then writes
 * the file to report. */
void vfi_make_parent_dirs(const char *path);

/* Replacing a file so that a reader sees its old contents or the new, never a part: write to *f,
 * a temporary file beside path (PATH.tmpPID) that vfi_replace_open makes, then
 * vfi_replace_close closes it and renames it over path - or, when writing it failed, removes
 * it. Both return VF_ERR_IO with the failing name and the system's reason (VF_ERR_NOMEM when out
 * of memory); vfi_replace_close always closes f and frees tmp. */
vf_status vfi_replace_open(const char *path, FILE **f, char **tmp, vf_err *err);
/* A new file at path, opened for writing with fopen's mode ("w", "wb"): created exclusively and
 * never through a symbolic link. Whatever is at path already - a temporary left by a killed run,
 * or a link planted there to make vidfeat write elsewhere - is removed first (the link itself,
 * not what it points to); if something is planted again in between, the open fails (EEXIST).
 * NULL with errno on failure. For temporary names that are renamed over the real one. */
FILE *vfi_fopen_new(const char *path, const char *mode);
/* The same as a descriptor (open(2)'s flags O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW); -1. */
int vfi_open_new(const char *path);
/* path opened for reading only if it is a regular file (never blocking on a FIFO or reading a
 * device a file names): NULL with errno, EINVAL for anything but a regular file. */
FILE *vfi_fopen_regular(const char *path);
vf_status vfi_replace_close(FILE *f, char *tmp, const char *path, vf_err *err);

#endif /* VIDFEAT_PATH_H */
