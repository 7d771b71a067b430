/*
 * stages.h - a pipeline run's state, shared by the files of its stages (private to pipeline/):
 * pipeline.c (setup and teardown; the decode, convert and infer threads), stage_rows.c (the
 * convert stage's windows and patches), stage_store.c (the store thread) and stages.c (what
 * every stage calls: stopping the run, events, tokens); and
 * query.c asks it for an audio model's front end.
 */
#ifndef VIDFEAT_STAGES_H
#define VIDFEAT_STAGES_H

#include <pthread.h>
#include <stdatomic.h>

#include "engine/extractor.h"
#include "media/decode.h"
#include "media/preprocess.h"
#include "core/queue.h"
#include "pipeline/source.h"
#include "pipeline/window.h"
#include "store/store.h"

#define FRAME_POOL          8
#define MAX_CONVERT_THREADS 64
#define MAX_LANES           16 /* files decoded at once */
#define GPU_LANES           4  /* by default for a GPU network: NVDEC decodes several at once */
/* Events a batch carries before it is sent on, full or not (many failing files in a row). */
#define MAX_MARKS           32
#define DEFAULT_QUEUE_DEPTH 2

/* ITEM_FLUSH: a lane's decoder will wait (for other workers' files): what its convert thread
 * has batched goes on now, so that the files it holds can finish meanwhile. */
enum item_kind { ITEM_FRAME, ITEM_BATCH, ITEM_BEGIN, ITEM_END, ITEM_SKIP, ITEM_FLUSH };

typedef struct item {
    enum item_kind kind;
    vf_work *work; /* the file it belongs to */
} item;

struct batch_item;

struct lane;

typedef struct frame_item {
    item hdr;
    struct lane *lane; /* whose pool it belongs to */
    vf_frame f;        /* an audio model's patch: its index, pts and t (no picture) */
    float *patch;      /* an audio model's: the patch's log-mel values (patch x bands), owned */
    double t_end;      /* and its end time */
    /* the conversion job, set by the convert thread for a worker */
    struct batch_item *b;
    int slot;
    int rotation;
} frame_item;

struct event_item;

/* A per-file event riding in a batch: handled by the store after the rows before `pos`. */
typedef struct marker {
    int pos;
    struct event_item *event;
} marker;

typedef struct batch_item {
    item hdr;
    int lane; /* the lane that filled it: all its rows and events are that lane's files */
    int n;
    /* batch x 3 x S x S floats (a clip model: batch x 3 x T x S x S): the backend's batch
     * input (host or device); a lane's ring: T pictures in host memory */
    void *images;
    int host;        /* a ring: its frames are converted on the host whatever the backend */
    float *features; /* batch x dim */
    int64_t *index, *pts;
    double *t;
    double *t_end;  /* a clip model's windows: the time of each one's last frame; else NULL */
    vf_work **work; /* per row: its file */
    marker marks[MAX_MARKS];
    int n_marks;
    /* Conversion: rows [settled, n) were handed to the workers since the batch was last
     * settled; pending of them are not done. Under the pipeline's conv_lock: pending, conv_rc,
     * conv_s and err. */
    int settled;
    int pending;
    vf_status *conv_rc; /* per row */
    double *conv_s;     /* per row: seconds its conversion took */
    vf_err err;         /* the first failed conversion since the last settle */
} batch_item;

typedef struct event_item {
    item hdr;
    struct event_item *prev, *next; /* the pipeline's list of live events */
    vf_video_meta meta;
    vf_status status;
    char error[VF_ERRMSG_SIZE];
    char note[VF_ERRMSG_SIZE]; /* ITEM_END of a done file: what it lacked (vfi_decoder_note) */
    char content_hash[32];
    int64_t size;
    double mtime;
    double t_open;                       /* monotonic seconds when decoding started */
    double decode_s, convert_s, infer_s; /* busy time per stage */
    int64_t decoded;
    vf_shot *shots; /* ITEM_END of a done file with --shots: its shots (owned); else NULL */
    int n_shots;
} event_item;

/* A lane decodes one file at a time, taking the next file of the list when it is done, into its
 * own frame pool, and its convert thread fills batches with its files only: a file's frames stay
 * together and in order whatever the other lanes do. */
typedef struct lane {
    struct vf_pipeline *p;
    int id;
    vf_queue *q_frames, *q_free_frames;
    frame_item *frames; /* the pool */
    int n_frames;
    /* a clip model: the current file's windows, and its frames converted into `ring` (a
     * batch_item of T rows of one picture, host memory) until their windows are taken */
    vf_windows win;
    batch_item ring;
    int64_t ring_accounted; /* frames whose conversion time went to the stage's busy time */
    float *window_row;      /* a window laid out on the host, when the batch input is not */
} lane;

struct vf_pipeline {
    vf_config cfg;
    char *db_path;
    char *root;         /* cfg.root's absolute form (record.h), or NULL */
    vf_archive archive; /* the root as what inputs may read in (core/path.h), when root is set */
    vf_extractor *ex;
    vf_model_info info;
    const vf_audio_spec *audio; /* an audio model's front end (the extractor's), or NULL */
    vf_store *store;
    int64_t model_id;
    char sampling[160];
    vf_err err;
    pthread_mutex_t lock; /* err, events, cancelled */
    atomic_int cancel;
    int stop_reason; /* the first fatal status of the current run */

    /* per run */
    vf_source *source;
    const vf_run_hooks *hooks;
    vf_queue *q_batches, *q_done, *q_free_batches;
    vf_queue *q_tokens; /* no_overlap only: frames allowed in flight */
    lane *lanes;
    int n_lanes;
    atomic_int live_lanes; /* convert threads still running: the last one closes q_batches */
    batch_item *batches;
    int n_batches;
    event_item *events;
    vf_queue *q_jobs; /* frames for the convert workers */
    /* per convert worker, made at create: a host converter (each owns a scaler), the backend's
     * converter where it converts frames, and a host slot when the batch input is not host
     * memory (frames the backend cannot convert are converted there, then copied) */
    vf_preproc_opts po;
    vf_preproc **pre;
    vf_converter **cv;
    float **scratch;
    int n_conv;
    pthread_mutex_t conv_lock; /* the batches' conversion state (see batch_item) */
    pthread_cond_t conv_done;  /* a batch's pending count reached 0, or the run is stopping */
    vf_hwdev *hw;       /* cfg.hwdec's device, shared by the decoders; NULL: decode on the CPU */
    int keep_on_device; /* hw's frames stay on the device, for the backend to convert */
    int lanes_wanted;   /* files decoded at once (cfg.decoders or automatic) */
    int window_stride;  /* a clip model (info.frames > 0): frames between windows' starts */
    vf_shot_opts shot_opts; /* cfg.shots: how cuts are found (media/shots.h) */
};

/* What the configuration asks of the opened model (checks.c): each VF_OK, or the failure in
 * p->err. A clip model's windows (sets p->window_stride) or none; an audio model's sound without
 * frame sampling; shots (sets p->shot_opts); the batches in flight within memory. */
vf_status vfi_pl_check_window(vf_pipeline *p, const vf_config *cfg);
vf_status vfi_pl_check_sound(vf_pipeline *p, const vf_config *cfg);
vf_status vfi_pl_check_shots(vf_pipeline *p, const vf_config *cfg);
vf_status vfi_pl_check_batch_memory(vf_pipeline *p);

/* Record the first fatal error and stop every stage (any thread). */
void vfi_pl_stop(vf_pipeline *p, vf_status code, const char *msg);
/* A new event of kind for w, listed in the run's events (NULL when out of memory); and its end. */
event_item *vfi_pl_new_event(vf_pipeline *p, enum item_kind kind, vf_work *w);
void vfi_pl_free_event(vf_pipeline *p, event_item *e);
/* no_overlap: n frames left the pipeline (stored or dropped): the decoder may go on. */
void vfi_pl_give_tokens(vf_pipeline *p, int n);
/* The calling helper thread (decode, convert, store) at a lower priority than inference. */
void vfi_pl_lower_priority(void);

/* stage_rows.c, for the convert thread. Floats of one converted picture (3 x S x S), and of one
 * row of a batch (a picture, a clip model's window of them, an audio model's patch). */
size_t vfi_pl_slot_floats(const vf_pipeline *p);
size_t vfi_pl_row_floats(const vf_pipeline *p);
/* Wait until the convert workers are done with b; 0 when the run is stopping. */
int vfi_pl_wait_converted(vf_pipeline *p, batch_item *b);
/* A clip model: fi handed to the workers to be converted into its slot of the lane's ring (a
 * frame no window holds goes back to the pool unconverted); then the window ready after the
 * frames so far (at_end: the file has ended) as the next row of b, once its frames are
 * converted, a window with a frame that failed left out (the error in *file_err), the stage's
 * time to *busy. An audio model: fi's patch as the next row of b, fi back to its pool. Each 0
 * when the run is stopping. */
int vfi_pl_window_frame(lane *ln, frame_item *fi, int rotation);
int vfi_pl_take_window(lane *ln, batch_item *b, vf_work *work, int at_end, double *busy,
                       vf_err *file_err);
int vfi_pl_take_patch(lane *ln, batch_item *b, frame_item *fi);

/* For query.c, which checks a model against stored rows: the run's audio model's front end, or
 * NULL (pipeline.c). */
const vf_audio_spec *vfi_pl_audio(const vf_pipeline *p);
/* The store thread (stage_store.c): batches into the database, files' ends reported. */
void *vfi_pl_store_thread(void *arg);

#endif /* VIDFEAT_STAGES_H */
