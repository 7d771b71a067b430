/*
 * digest.h - file digests: SHA-256 (FIPS 180-4, by libcrypto) of a file, for model identity in the
 * database, calibration files and manifest checks.
 */
#ifndef VIDFEAT_DIGEST_H
#define VIDFEAT_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

/* hex: 65 bytes (64 hex digits + NUL). VF_ERR_IO when the file cannot be read. */
vf_status vfi_sha256_file(const char *path, char hex[65], vf_err *err);
/* A fingerprint of a large file: SHA-256 of its size and 64 blocks of 4 KiB spread evenly over
 * it (the whole file when it is smaller). Telling re-exported model files apart costs one
 * 256 KiB read instead of reading a VGG19's 550 MB. */
vf_status vfi_sha256_file_sampled(const char *path, char hex[65], vf_err *err);
/* vfi_sha256_file through the user's digest cache (sha256.c says where and how): a file read
 * before, unchanged since (device, inode, size, modification and status-change times), is not
 * read again. Without a usable cache it hashes the file. */
vf_status vfi_sha256_file_cached(const char *path, char hex[65], vf_err *err);
/* One-shot over memory. */
void vfi_sha256(const void *data, size_t size, char hex[65]);

#endif /* VIDFEAT_DIGEST_H */
