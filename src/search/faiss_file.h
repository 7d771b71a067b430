/*
 * faiss_file.h - FAISS's index file format, walked before FAISS reads it. FAISS's reader trusts
 * the sizes it reads: it allocates what a count says before reading the bytes behind it, and
 * divides by fields nothing has checked (a product quantizer of zero pieces ends the process
 * with SIGFPE). vidfeat hands FAISS only files whose structure is one of the kinds it makes
 * (flat, HNSW, IVF-Flat, IVF-SQ8, IVF-PQ, behind an id map or a linear transform) and whose every
 * count fits in the bytes left in the file, so that reading one costs memory in proportion to
 * its size. What the structures say of each other is ann_faiss.cpp's check after reading.
 */
#ifndef VIDFEAT_FAISS_FILE_H
#define VIDFEAT_FAISS_FILE_H

#include <stdio.h>

#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Walk the index written at f's position (to the end of the file at most) and put the position
 * back. VF_OK when FAISS may read it; VF_ERR_INVALID "not an index vidfeat made: <what>" when
 * not; VF_ERR_IO when f cannot be read or positioned. */
vf_status vfi_faiss_file_check(FILE *f, vf_err *err);

#ifdef __cplusplus
}
#endif

#endif
