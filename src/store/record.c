/*
 * record.c - see record.h.
 */
#include "store/record.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/mem.h"
#include "core/path.h"
#include "core/digest.h"

#define HASH_SPAN 65536 /* bytes from each end of a file in its content hash */

void vfi_record_sampling(const vf_config *c, int frames, const vf_audio_spec *audio, char *buf,
                         size_t size)
{
    size_t n = 0;
    if (audio)
        n += (size_t)snprintf(buf, size, "sound;patch=%d;hop=%d", audio->patch, audio->patch_hop);
    else if (c->keyframes)
        n += (size_t)snprintf(buf + n, size - n, "keyframes");
    else if (c->sample_fps > 0)
        n += (size_t)snprintf(buf + n, size - n, "fps=%g", c->sample_fps);
    else if (c->every > 1)
        n += (size_t)snprintf(buf + n, size - n, "every=%d", c->every);
    else
        n += (size_t)snprintf(buf + n, size - n, "all");
    if (c->start > 0 && n < size)
        n += (size_t)snprintf(buf + n, size - n, ";start=%g", c->start);
    if (c->duration > 0 && n < size)
        n += (size_t)snprintf(buf + n, size - n, ";duration=%g", c->duration);
    if (c->max_frames > 0 && n < size)
        n += (size_t)snprintf(buf + n, size - n, ";max=%lld", (long long)c->max_frames);
    if (frames > 0 && !audio && n < size)
        snprintf(buf + n, size - n, ";window=%d;stride=%d", frames,
                 c->window_stride > 0 ? c->window_stride : frames);
}

int vfi_record_is_sound(const char *preprocessing)
{
    return preprocessing && !strncmp(preprocessing, "sound=", 6); /* audio_prep's start */
}

int vfi_record_frames(const char *preprocessing)
{
    int sound = vfi_record_is_sound(preprocessing);
    const char *key = sound ? ";patch=" : ";frames=";
    const char *f = preprocessing ? strstr(preprocessing, key) : NULL;
    int n = 0;
    if (f && sscanf(f + strlen(key), "%d", &n) == 1 && n > 0)
        return n;
    return 0;
}

/* An audio model's preprocessing: the front end, every parameter (logmel.h), and how the
 * sound reaches it (every channel's mean, libswresample). */
static void audio_prep(const vf_audio_spec *a, char *prep, size_t size)
{
    const vf_logmel_cfg *f = &a->front;
    snprintf(prep, size,
             "sound=mean,swr;rate=%d;window=%d;hop=%d;fft=%d;center=%d;power=%d;mels=%d;"
             "fmin=%g;fmax=%g;scale=%s;triangles=%s;norm=%s;log=%s;offset=%g;patch=%d;bands=%d",
             f->sample_rate, f->window, f->hop, f->n_fft, f->center, f->power, f->n_mels, f->fmin,
             f->fmax, f->scale == VF_MEL_HTK ? "htk" : "slaney", f->triangles_in_mel ? "mel" : "hz",
             f->slaney_norm ? "slaney" : "none", f->log == VF_MEL_DB ? "db" : "ln", f->log_offset,
             a->patch, f->n_mels);
}

/* An image or clip model's preprocessing: input, resize, channel order, mean and std, pooling,
 * and the frame conversion's definition (conversion=: yuvconv.h). */
static void image_prep(const vf_model_info *info, char *prep, size_t prep_size)
{
    char resize[64];
    if (info->resize == VF_RESIZE_FIXED_CROP)
        snprintf(resize, sizeof(resize), "resize_crop;to=%dx%d", info->resize_to[0],
                 info->resize_to[1]);
    else
        snprintf(resize, sizeof(resize), "%s;short=%d",
                 info->resize == VF_RESIZE_STRETCH ? "stretch" : "short_side_crop",
                 info->resize_short);
    /* a clip model's input holds a window: frames= says how many (and that rows are windows) */
    char size[48];
    if (info->frames > 0)
        snprintf(size, sizeof(size), "%d;frames=%d", info->input_size, info->frames);
    else
        snprintf(size, sizeof(size), "%d", info->input_size);
    snprintf(prep, prep_size,
             "size=%s;resize=%s;order=%s;mean=%g,%g,%g;"
             "std=%g,%g,%g;pooled=%d;conversion=yuvconv-1",
             size, resize, info->channel_order == VF_CHANNELS_RGB ? "RGB" : "BGR", info->mean[0],
             info->mean[1], info->mean[2], info->std[0], info->std[1], info->std[2], info->pooled);
}

vf_status vfi_record_model(const vf_model_info *info, const vf_audio_spec *audio, int store_f16,
                           vf_store_model *m, char sha[65], char *prep, size_t prep_size,
                           vf_err *err)
{
    vf_status rc = vfi_sha256_file_cached(info->path, sha, err);
    if (rc < 0)
        return rc;
    if (audio)
        audio_prep(audio, prep, prep_size);
    else
        image_prep(info, prep, prep_size);
    *m = (vf_store_model){info->name,
                          sha,
                          info->layer,
                          info->feature_dim,
                          store_f16,
                          prep,
                          info->weights ? vf_weights_str(info->weights) : NULL,
                          NULL};
    return VF_OK;
}

vf_status vfi_record_text_tower(const vf_model_info *info, vf_store_model *m, char text_sha[65],
                                vf_err *err)
{
    if (!info->text_tower)
        return VF_OK;
    vf_status rc = vfi_sha256_file_cached(info->text_tower, text_sha, err);
    if (rc >= 0)
        m->text_sha256 = text_sha;
    return rc;
}

vf_status vfi_record_file_init(vf_record_file *f, const char *path)
{
    f->path = path;
    f->name = NULL;
    if (path && path[0] && !(f->name = vfi_path_absolute(path)))
        return VF_ERR_NOMEM;
    return VF_OK;
}

char *vfi_record_root(const char *root)
{
    char *abs = vfi_path_absolute(root);
    size_t n = abs ? strlen(abs) : 0;
    while (n > 1 && abs[n - 1] == '/')
        abs[--n] = '\0';
    return abs;
}

vf_status vfi_record_file_init_root(vf_record_file *f, const char *path, const char *root,
                                    vf_err *err)
{
    vf_status rc = vfi_record_file_init(f, path);
    if (rc < 0 || !root || !f->name)
        return rc < 0 ? vfi_fail(err, rc, "out of memory") : VF_OK;
    size_t n = strlen(root);
    int top = n == 1; /* "/" */
    if (strncmp(f->name, root, n) || (!top && f->name[n] != '/') || !f->name[n + !top]) {
        vfi_record_file_clear(f);
        return vfi_fail(err, VF_ERR_INVALID, "%s: not under --root %s", path, root);
    }
    memmove(f->name, f->name + n + !top, strlen(f->name + n + !top) + 1);
    return VF_OK;
}

char *vfi_record_locate(const char *name, const char *root)
{
    if (!root || name[0] == '/')
        return vfi_strdup(name);
    size_t n = strlen(root) + strlen(name) + 2;
    char *p = vfi_malloc(n);
    if (p)
        snprintf(p, n, "%s%s%s", root, strcmp(root, "/") ? "/" : "", name);
    return p;
}

void vfi_record_file_clear(vf_record_file *f)
{
    vfi_free(f->name);
    f->name = NULL;
}

const char *vfi_record_name(const vf_record_file *f)
{
    return f->name ? f->name : f->path;
}

double vfi_record_mtime(const struct stat *st)
{
    return (double)st->st_mtim.tv_sec + st->st_mtim.tv_nsec * 1e-9;
}

void vfi_record_content_hash(const char *path, int64_t size, char out[32])
{
    uint64_t h = 1469598103934665603ull;
    unsigned char buf[4096];
    for (int i = 0; i < 8; i++) {
        h ^= (uint64_t)(size >> (8 * i)) & 255;
        h *= 1099511628211ull;
    }
    FILE *f = fopen(path, "rb");
    if (f) {
        for (int part = 0; part < 2; part++) {
            if (part == 1 && size > 2 * HASH_SPAN)
                fseeko(f, (off_t)(size - HASH_SPAN), SEEK_SET);
            else if (part == 1)
                break;
            size_t left = HASH_SPAN, n;
            while (left && (n = fread(buf, 1, left < sizeof(buf) ? left : sizeof(buf), f)) > 0) {
                for (size_t i = 0; i < n; i++) {
                    h ^= buf[i];
                    h *= 1099511628211ull;
                }
                left -= n;
            }
        }
        fclose(f);
    }
    snprintf(out, 32, "fnv64:%016llx", (unsigned long long)h);
}

int vfi_record_measured(double rate)
{
    return rate > 0 && isfinite(rate);
}
