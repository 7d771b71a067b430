/*
 * vidfeat.h - the whole public API of libvidfeat.
 *
 * vidfeat turns images and video frames into CNN feature vectors. This header is the contract:
 * anything not declared here is internal and may change without notice. It depends only on the
 * C standard library, compiles as C99 and C++, and never changes with the build configuration
 * (ask vf_has_feature() what was compiled in).
 *
 * Threads: a handle may be used by one thread at a time. Functions marked "any thread" may be
 * called concurrently with everything else. Nothing here keeps global mutable state except the
 * log callback (vf_set_log_callback).
 *
 * Errors: every fallible function returns a vf_status; a test for failure is `if (rc < 0)`.
 * Handles carry the text of their last error (vf_extractor_errmsg()).
 */
#ifndef VIDFEAT_H
#define VIDFEAT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define VF_API __declspec(dllexport)
#elif defined(__GNUC__)
#define VF_API __attribute__((visibility("default")))
#else
#define VF_API
#endif

#define VF_VERSION_MAJOR 0
#define VF_VERSION_MINOR 1
#define VF_VERSION_PATCH 0

/** Status codes. Values are stable; new codes are only appended. */
typedef enum vf_status {
    VF_OK = 0,
    VF_EOF = 1,              /**< end of stream or queue: a normal stop, not a failure */
    VF_ERR_INVALID = -1,     /**< bad argument or API misuse */
    VF_ERR_NOMEM = -2,       /**< out of memory, or a size beyond what we accept */
    VF_ERR_IO = -3,          /**< cannot open, read or write a file */
    VF_ERR_DECODE = -4,      /**< demux, decode or scale failed */
    VF_ERR_MODEL = -5,       /**< model file malformed or inconsistent */
    VF_ERR_UNSUPPORTED = -6, /**< valid model using an operator or attribute we lack */
    VF_ERR_BACKEND = -7,     /**< the compute library failed at run time */
    VF_ERR_NO_DEVICE = -8,   /**< backend compiled in, but no usable device here */
    VF_ERR_NOT_BUILT = -9,   /**< feature not compiled into this build */
    VF_ERR_STORE = -10,      /**< the database failed */
    VF_ERR_CANCELLED = -11,  /**< cancelled by the caller or by a failing stage */
    VF_ERR_INTERNAL = -12,   /**< a vidfeat bug: an invariant did not hold */
    VF_ERR_LEASE = -13,      /**< the file's lease ran out and another worker has it now */
    VF_ERR_DENIED = -14,     /**< an input refers to a file it may not read (outside its archive) */
} vf_status;

/** Numeric precision the network runs in. */
typedef enum vf_precision {
    VF_PRECISION_F32 = 0,  /**< exact float32 (within 1e-4 relative of ONNX Runtime) */
    VF_PRECISION_BF16 = 1, /**< bfloat16 weights and activations, float32 accumulation */
    VF_PRECISION_F16 = 2,  /**< float16 weights and activations, float32 accumulation (GPU) */
    VF_PRECISION_TF32 = 3, /**< float32 tensors, TF32 tensor-core products (GPU) */
    VF_PRECISION_INT8 = 4, /**< 8-bit convolutions and inner products (CPU, AMX/VNNI), scales
                                from a calibration file (vf_config.int8_scales) or calibrated
                                on the first frames the network sees */
    VF_PRECISION_AUTO = 5, /**< bf16 where this CPU has bf16 instructions, runs the model at
                                least 10% faster in it and its bf16 features keep a cosine of
                                0.999 to f32's (measured once per model and machine, kept in the
                                plan cache); f32 otherwise. vf_model_info.precision says which. */
} vf_precision;

/** Order of the colour channels the network expects in its input tensor. */
typedef enum vf_channel_order {
    VF_CHANNELS_RGB = 0,
    VF_CHANNELS_BGR = 1,
} vf_channel_order;

/** How a frame is fitted to the network's square input. */
typedef enum vf_resize_policy {
    VF_RESIZE_STRETCH = 0,    /**< whole frame scaled to size x size, aspect not kept */
    VF_RESIZE_SHORT_CROP = 1, /**< shorter side to resize_short, then a centred size x size crop */
    VF_RESIZE_FIXED_CROP = 2, /**< scaled to resize_to (aspect not kept), then a centred crop */
} vf_resize_policy;

/**
 * Options for opening a model. Obtain defaults with vf_config_default() and change only what
 * you need; fields are only ever appended.
 */
typedef struct vf_config {
    /** A known model's name (a manifest models/NAME.json, see vf_model_list()) or a path to an
     *  ONNX file. Default "inception_v3". */
    const char *model;
    /** Extra directory searched first for manifests and ONNX files; NULL for none. The search
     *  continues with $VIDFEAT_MODELS, ./models and the installed models directory. */
    const char *models_dir;
    /** Feature layer: a name from the manifest ("fc7", "pool5") or any tensor name in the graph.
     *  NULL: the manifest's default layer, or the graph's first output for a plain ONNX file. */
    const char *layer;
    /** "auto", "cpu" (oneDNN), "ref" (plain C, slow, exact) or "cuda". Default "auto". */
    const char *backend;
    vf_precision precision; /**< default VF_PRECISION_F32 */
    int batch_size;         /**< images per forward pass, 1..4096; default 32 */
    int n_threads;          /**< compute threads; 0 = all cores */
    /** Input preprocessing; 0 / NULL fields take the manifest's values. For a plain ONNX file
     *  input_size defaults to the graph's input size, mean to 0 and std to 1 (pixel units,
     *  0..255). An input_size other than a file's fixed one re-infers the graph's shapes at it;
     *  a graph that cannot take it fails, naming the node. */
    int input_size;
    float mean[3]; /**< per channel, in pixel units; std[0] == 0 means "not set" */
    float std[3];

    /* ---- extraction (vf_pipeline); ignored by vf_extractor ---- */
    /** SQLite database the vectors go to (created if missing); NULL: no storage, vectors reach
     *  the caller only through vf_run_hooks.batch. Default NULL. */
    const char *db_path;
    double sample_fps;  /**< > 0: at most this many frames per second (by time); 0 = all */
    int every;          /**< keep every Nth decoded frame; 0 or 1 = all */
    int keyframes;      /**< only key frames (the decoder skips the others) */
    double start;       /**< seconds into the file to start at; 0 = beginning */
    double duration;    /**< seconds to cover after start; 0 = to the end */
    int64_t max_frames; /**< stop a file after this many sampled frames; 0 = no limit */
    int force;          /**< redo files the database already has (default: skip them) */
    int store_f16;      /**< store vectors as float16 instead of float32 */
    int queue_depth;    /**< batches in flight between stages; 0 = default (2) */
    int decode_threads; /**< codec threads per file; 0 = automatic */
    /** Abandon a file when no frame has been decoded for this many seconds (a stalled source
     *  or a stream that decodes to nothing); 0 = never. Default 60. */
    double stall_timeout;
    /** 1: at most one batch anywhere in the pipeline, so the stages take turns instead of
     *  overlapping. With batch_size 1 this is the per-frame way of the slow tools (decode a
     *  frame, convert it, run the network, store, repeat): vidfeat bench's baseline. Slow. */
    int no_overlap;

    /* ---- int8 (appended in 0.1) ---- */
    /** The calibration file: the largest |x| of every tensor, observed in f32 on sample frames.
     *  NULL: MODEL.onnx.int8 beside the model file, or $XDG_CACHE_HOME/vidfeat (~/.cache/vidfeat)
     *  where the model's directory is read-only. "": none (calibrate every time, save nothing).
     *  A file that matches the model file and the preprocessing is used as it is; otherwise the
     *  first frames calibrate and the file is written. */
    const char *int8_scales;
    /** Frames to calibrate on when there is no usable file: they run in f32 and are observed
     *  before the network switches to int8. 0 = 32 or one batch, whichever is more. */
    int64_t calibration_frames;
    /** Calibrate again even when a matching calibration file exists (and overwrite it). */
    int recalibrate;

    /* ---- hardware decoding (appended in 0.1) ---- */
    /** Decode on this FFmpeg hardware device type ("cuda": NVIDIA's NVDEC) where it supports
     *  the file's codec and profile; other files decode on the CPU. The kept frames are copied
     *  back and converted like software-decoded ones, so the vectors are the same. NULL, "" or
     *  "none": the CPU. vf_pipeline_create fails with VF_ERR_NO_DEVICE when the device cannot
     *  be opened (no driver or GPU; the message says FFmpeg's reason). */
    const char *hwdec;
    /** Frames converted (colour, resize, normalise) at once, each on its own thread, 0..64; the
     *  vectors do not depend on it. 0 = automatic: 1 when the network runs on the CPU (it needs
     *  the cores), half the cores up to 8 when it runs on a GPU. */
    int convert_threads;

    /* ---- files at once (appended in 0.1) ---- */
    /** Files decoded at the same time, 0..16, each by its own decoder, their frames sharing the
     *  batches: for a GPU that one decoder cannot keep busy. Each file's frames still reach the
     *  database together and in order; the vectors do not depend on it. 0 = automatic: 1 when
     *  the network runs on the CPU, 4 when it runs on a GPU (never more than there are files). */
    int decoders;

    /* ---- many workers on one database (appended in 0.1) ---- */
    /** Record files by their path relative to this directory instead of their absolute path,
     *  so that machines mounting an archive at different places agree on each file. A file
     *  outside it fails. NULL: absolute paths. */
    const char *root;
    /** A worker holds each file it claims from the database for this many seconds, renewed
     *  while it works; when the worker dies the file is claimed again after that. Default 60. */
    double lease_s;
    /** A file whose worker died this many times in a row is marked failed instead of being
     *  claimed again. Default 3. */
    int max_attempts;

    /* ---- what an input may read (appended in 0.1; docs/archives.md "What vidfeat reads") ---- */
    /** With root: let a file, or a file its format refers to (a playlist's segments), be read
     *  through a symbolic link that leads out of the root. 0 (default): such a file fails,
     *  named, never opened. Without root, links inside the archive are followed either way,
     *  and what an input refers to must resolve inside the input's own directory. */
    int follow_links_outside;

    /* ---- what one input may cost (appended in 0.2; docs/security.md) ---- */
    /** A video whose frames have more pixels than this fails, named, before it is decoded
     *  (so a small file cannot make a decoder take gigabytes). 0: the default, 40,000,000
     *  (8K, 7680x4320 or 8192x4320, is 33-35 million). */
    int64_t max_pixels;
    /** A file with more streams than this fails before its streams are probed (each probed
     *  stream has a decoder of its own). 0: the default, 64. */
    int max_streams;

    /* ---- clip models (appended in 0.2; docs/models.md "Clip models") ---- */
    /** A clip model's window: the sampled frames of one vector. The model fixes it; 0 takes
     *  the model's, another number than the model's fails. An image model refuses it. */
    int window;
    /** Sampled frames from one window's first frame to the next one's; 0: the window (windows
     *  side by side). Smaller overlaps them (each frame is still decoded and converted once);
     *  larger leaves frames out. */
    int window_stride;

    /* ---- what one input may cost, continued (appended in 0.3; docs/security.md) ---- */
    /** Seconds of picture or sound a file may run, read as it is decoded; past it the file
     *  fails, named, as a file that stops decoding midway does (a small file can hold hours of
     * silence or of a still picture: decoding them is work in proportion to their time, not their
     *  size). 0: the default, an hour plus an hour per megabyte of the file (no bound where
     *  its size is unknown); < 0: no bound. */
    double max_duration;

    /* ---- shots (appended in 0.3; docs/shots.md) ---- */
    /** Look for cuts while decoding (every frame of the window is then decoded, whatever the
     *  sampling keeps) and store each file's shots with its extraction: PySceneDetect's
     *  ContentDetector. Not with keyframes (which decodes only key frames) or an audio model. */
    int shots;
    /** A frame whose content score reaches this starts a shot; 0: the default, 27. */
    double shot_threshold;
    /** The shortest shot, in frames (closer cuts merge); 0: the default, 15; < 0: none. */
    int shot_min_frames;
} vf_config;

/** An opened model: the network compiled for one backend, batch size and precision. */
typedef struct vf_extractor vf_extractor;

/** What a model file's weights are, known when it is loaded (docs/models.md). */
typedef enum vf_weights_kind {
    VF_WEIGHTS_UNKNOWN = 0, /**< no manifest with a sha256 describes the file, no marker in it */
    VF_WEIGHTS_OFFICIAL,    /**< the manifest's official file: size and SHA-256 match */
    VF_WEIGHTS_OTHER,       /**< another file under the manifest's name: features differ */
    VF_WEIGHTS_RANDOM,      /**< marked random by scripts/export-torchvision.py: test use only */
} vf_weights_kind;

/** What an extractor expects and produces. Strings are borrowed from the extractor. */
typedef struct vf_model_info {
    const char *name;       /**< manifest name, or the ONNX file's base name */
    const char *path;       /**< the ONNX file that was loaded */
    const char *layer;      /**< the feature layer's name as requested or defaulted */
    const char *tensor;     /**< the graph tensor the features come from */
    const char *backend;    /**< backend actually used: "dnnl", "ref", "cuda" */
    vf_precision precision; /**< the one it runs in: never VF_PRECISION_AUTO (auto's choice) */
    int batch_size;
    int input_size;  /**< the network's input is [N, 3, input_size, input_size] */
    int feature_dim; /**< floats per image in the output */
    int pooled;      /**< 1 if a 4-D map is global-average-pooled into the vector */
    vf_channel_order channel_order;
    vf_resize_policy resize;
    int resize_short; /**< shorter side before the crop (VF_RESIZE_SHORT_CROP) */
    float mean[3];    /**< pixel units, in channel_order */
    float std[3];
    const char *device; /**< the GPU's name for a GPU backend, NULL for the CPU ones */
    /** int8: the calibration file the scales were read from or saved to; NULL when not int8,
     *  not saved yet or not to be saved. */
    const char *int8_scales;
    /** int8: frames the scales were calibrated on (read, saved or final); 0 before. */
    int64_t calibration_frames;
    /** Whose weights: the manifest's official file, another file, random weights. */
    vf_weights_kind weights;
    /** A CLIP model: the text tower paired with it, where it was found (its manifest's "text");
     *  NULL for other models, or when the file is not here. (Appended in 0.1.) */
    const char *text_tower;
    /** A clip model: the frames of one input (the network's input is [N, 3, frames,
     *  input_size, input_size], one vector per window of that many frames); 0 for an image
     *  model. (Appended after text_tower.) */
    int frames;
    /** VF_RESIZE_FIXED_CROP: the height and width a frame is scaled to before its centred
     *  input_size x input_size crop (torchvision's video recipe: 128 x 171); else 0. */
    int resize_to[2];
    /** An audio model (its manifest's "audio"): the network's input is [N, 1, audio_frames,
     *  audio_bands], a patch of log-mel frames of a sound at sample_rate Hz, one vector per
     *  patch; input_size is 0. All three 0 for an image or clip model. (Appended after
     *  resize_to.) */
    int audio_frames;
    int audio_bands;
    int sample_rate;
    /** Asked for VF_PRECISION_AUTO: why precision is what it is ("bf16: 2.1 ms an image against
     *  f32's 4.3 ms, worst cosine 0.99962"); NULL when a precision was asked. (Appended after
     *  sample_rate.) */
    const char *precision_why;
} vf_model_info;

/** The default configuration (thread-safe, no allocation). */
VF_API vf_config vf_config_default(void);

/**
 * Load, check and compile a model.
 *
 * @param cfg  options; copied, need not outlive the call.
 * @param out  receives the extractor. On failure *out is still set when the failure could be
 *             described (every status but VF_ERR_NOMEM and VF_ERR_INVALID for a NULL cfg), so
 *             that vf_extractor_errmsg() explains it; free it with vf_extractor_free() either way.
 * @return VF_OK; VF_ERR_INVALID (bad option), VF_ERR_IO (file missing: the message gives the
 *         expected path and how to get the model), VF_ERR_MODEL, VF_ERR_UNSUPPORTED (names the
 *         operator and node), VF_ERR_NOT_BUILT / VF_ERR_NO_DEVICE (backend), VF_ERR_BACKEND,
 *         VF_ERR_NOMEM.
 */
VF_API vf_status vf_extractor_create(const vf_config *cfg, vf_extractor **out);

/** Describe the extractor. @p info is filled; its strings live as long as @p ex. */
VF_API vf_status vf_extractor_info(const vf_extractor *ex, vf_model_info *info);

/**
 * Run the network on @p n preprocessed images.
 *
 * @param images    n x 3 x S x S float32, planar, already normalised ((pixel - mean) / std) in the
 *                  model's channel order, S = input_size (a clip model: n windows of 3 x frames x
 *                  S x S; an audio model: n patches of audio_frames x audio_bands log-mel
 *                  values, as the manifest's front end computes them).
 * @param n         any number >= 1; the extractor runs it in batches of batch_size.
 * @param features  receives n x feature_dim float32.
 * @return VF_OK, VF_ERR_INVALID, VF_ERR_BACKEND.
 */
VF_API vf_status vf_extractor_infer(vf_extractor *ex, const float *images, int n, float *features);

/**
 * Run the network on @p n 8-bit RGB pictures, converted as the pipeline converts a decoded
 * picture (the model's resize or crop, channel order, mean and std): the same vectors as
 * extracting a PNG file of those pixels. (Appended in 0.1.)
 *
 * @param pixels    n x height x width x 3 bytes, R, G, B, rows without padding.
 * @param features  receives n x feature_dim float32.
 * @return VF_OK, VF_ERR_INVALID (a size of 0 or beyond 65536), VF_ERR_NOMEM, VF_ERR_BACKEND.
 */
VF_API vf_status vf_extractor_infer_rgb(vf_extractor *ex, const uint8_t *pixels, int n, int height,
                                        int width, float *features);

/** The last error's text on this handle; "" if none. Borrowed: valid until the next call. */
VF_API const char *vf_extractor_errmsg(const vf_extractor *ex);

/** Free an extractor. Accepts NULL and *pex == NULL; sets *pex to NULL. */
VF_API void vf_extractor_free(vf_extractor **pex);

/* ---- text: a CLIP model's text tower (appended in 0.1; docs/search.md "Searching by words") -- */

/**
 * A CLIP model's text side: its tokenizer (CLIP's byte-level BPE, the ids OpenAI's reference
 * gives) and its text tower compiled for one backend, batch size and precision, giving texts
 * embeddings in the space of the image tower's `embed` layer. Used by one thread at a time.
 */
typedef struct vf_text_encoder vf_text_encoder;

/** What a text encoder is. Strings are borrowed from it. */
typedef struct vf_text_info {
    const char *name;    /**< the model (its manifest's name, which its image vectors carry) */
    const char *path;    /**< the text tower's ONNX file */
    const char *vocab;   /**< the tokenizer's vocabulary file; NULL: none (ids only) */
    const char *backend; /**< "dnnl" or "ref" */
    vf_precision precision;
    int batch_size;
    int context;             /**< token ids a text is cut or padded to (77) */
    int vocab_size;          /**< ids of the vocabulary (49,408) */
    int dim;                 /**< floats of an embedding */
    vf_weights_kind weights; /**< random when the tower was exported with random weights */
} vf_text_info;

/**
 * Open a text encoder. cfg->model names a CLIP model (a manifest with a "text" section, such as
 * "clip_vit_b32", or either of its ONNX files); a text tower file no manifest names runs token
 * ids only (vf_text_encode_ids). cfg->backend, precision (f32 or bf16; auto runs f32),
 * batch_size, n_threads and models_dir apply as for images.
 * @param out  receives the encoder, also on failure (but VF_ERR_NOMEM and a NULL cfg), for
 *             vf_text_encoder_errmsg(); free it with vf_text_encoder_free() either way.
 * @return VF_OK; VF_ERR_INVALID (bad option, a model without a text tower), VF_ERR_IO (the tower
 *         or the vocabulary missing: the message says how to get it), VF_ERR_MODEL (a tower that
 *         does not take [N, context] token ids, a token table of another size than the
 *         vocabulary, a vocabulary file that is not the manifest's), VF_ERR_UNSUPPORTED, backend
 *         statuses, VF_ERR_NOMEM.
 */
VF_API vf_status vf_text_encoder_create(const vf_config *cfg, vf_text_encoder **out);

/** Describe the encoder; info's strings live as long as @p te. */
VF_API vf_status vf_text_encoder_info(const vf_text_encoder *te, vf_text_info *info);

/**
 * The token ids of one text (UTF-8), as the text tower reads them: the start token, the text's
 * BPE ids, the end token, at most `context` in all (a longer text keeps its first context - 2
 * and the end token; a warning line says so), zeros after.
 * @param ids        receives context ids.
 * @param n_ids      (may be NULL) receives how many are the text's (before the zeros).
 * @param truncated  (may be NULL) receives 1 when the text was cut.
 * @return VF_OK; VF_ERR_INVALID (NULL text, text that is not UTF-8: the message names the byte,
 *         no vocabulary), VF_ERR_NOMEM.
 */
VF_API vf_status vf_text_tokenize(vf_text_encoder *te, const char *text, int64_t *ids, int *n_ids,
                                  int *truncated);

/**
 * Embed @p n texts: tokenized, run through the text tower in batches of batch_size.
 * @param embeddings  receives n x dim float32 (as the tower gives them: not normalised).
 * @return VF_OK, VF_ERR_INVALID (as vf_text_tokenize), VF_ERR_BACKEND, VF_ERR_NOMEM.
 */
VF_API vf_status vf_text_encode(vf_text_encoder *te, const char *const *texts, int n,
                                float *embeddings);

/**
 * Embed @p n token-id sequences of `context` ids each (n x context int64), as given.
 * @return VF_OK, VF_ERR_INVALID (an id outside the vocabulary), VF_ERR_BACKEND, VF_ERR_NOMEM.
 */
VF_API vf_status vf_text_encode_ids(vf_text_encoder *te, const int64_t *ids, int n,
                                    float *embeddings);

/** The last error's text on this handle; "" if none. Borrowed: valid until the next call. */
VF_API const char *vf_text_encoder_errmsg(const vf_text_encoder *te);

/** Free a text encoder. Accepts NULL and *pte == NULL; sets *pte to NULL. */
VF_API void vf_text_encoder_free(vf_text_encoder **pte);

/** Is text a query a text tower can embed? VF_OK, or VF_ERR_INVALID with the reason in errbuf,
 *  worded to follow the text's name ("is not UTF-8 (byte 3, 0xff)", "is empty: ...", "is only
 *  white space: ..." - Unicode's, and what Python's str.isspace() takes). */
VF_API vf_status vf_text_check(const char *text, char *errbuf, size_t errbuf_size);

/* ---- extraction pipeline ---------------------------------------------------------------- */

/**
 * Decode, sample, convert, infer and store, each stage on its own thread joined by bounded
 * queues, for a list of files: decoding of the next file overlaps inference of the current one.
 * A vf_pipeline is used by one thread at a time, except vf_pipeline_cancel() (any thread).
 */
typedef struct vf_pipeline vf_pipeline;

/** The outcome of one input file. Strings are borrowed for the duration of the callback. */
typedef struct vf_file_result {
    const char *path;
    vf_status status;  /**< VF_OK done; < 0 failed (error says why) */
    int skipped;       /**< already done in the database: nothing was run */
    const char *error; /**< one line, "" when status is VF_OK */
    /** a done file that was not whole, one line ("" when it was): "partial: N of M frames the
     *  index promises" (cut short: the frames up to the cut are kept, as FFmpeg's command line
     *  decodes them), "K corrupt packets skipped", or a --start past its end. Stored as the
     *  extraction's error column of a done row. */
    const char *note;
    int64_t frames; /**< vectors produced (stored) for this file */
    double seconds; /**< wall time from opening the file to its last vector */
    /** per stage: frames / busy s; store_fps 0 when nothing is stored (no database) */
    double decode_fps, convert_fps, infer_fps, store_fps;
    int width, height, rotation;
    const char *codec;
    const char *hwdec; /**< the device that decoded it ("cuda"), "" for the CPU */
} vf_file_result;

/** One batch of vectors, as it leaves the network. Arrays are borrowed during the callback. */
typedef struct vf_batch_view {
    int file; /**< index into the run's path list */
    const char *path;
    int n; /**< vectors in this batch */
    int dim;
    const float *features; /**< n x dim */
    const int64_t *frame_index;
    const int64_t *pts; /**< presentation timestamps in the stream's time base */
    const double *t;    /**< seconds from the start of the file's timeline */
    /** A clip model's windows: the seconds of each window's last frame (frame_index, pts and t
     *  are its first frame's); NULL for an image model. (Appended in 0.2.) */
    const double *t_end;
} vf_batch_view;

/** Callbacks of a run; all are optional and called on the pipeline's store thread. */
typedef struct vf_run_hooks {
    void *user;
    /** After each batch; frames_expected is an estimate (0 if unknown). Non-zero cancels. */
    int (*progress)(void *user, int file, const char *path, int64_t frames_done,
                    int64_t frames_expected);
    /** When a file is finished, failed or skipped. */
    void (*file_done)(void *user, int file, const vf_file_result *result);
    /** Each batch of vectors (also when they are stored). Non-zero cancels. */
    int (*batch)(void *user, const vf_batch_view *batch);
} vf_run_hooks;

/** Open the model (as vf_extractor_create) and the database. On failure *out is still set when
 *  the failure could be described; free it either way. */
VF_API vf_status vf_pipeline_create(const vf_config *cfg, vf_pipeline **out);
/**
 * Extract every file in paths. A file that cannot be read or decoded is reported through
 * hooks->file_done (and recorded as failed in the database) and the run goes on. With a
 * database, each file is claimed before it is extracted, so several processes (on one machine
 * with SQLite, on many with PostgreSQL) given the same files share them, each extracted once;
 * the files others extracted are reported skipped.
 * @return VF_OK when every file was attempted (check the results for failures);
 *         VF_ERR_CANCELLED after vf_pipeline_cancel() or a hook asked to stop (vectors already
 *         written stay; unfinished extractions are never marked done); VF_ERR_STORE or
 *         VF_ERR_BACKEND when the run could not go on.
 */
VF_API vf_status vf_pipeline_run(vf_pipeline *p, const char *const *paths, int n_paths,
                                 const vf_run_hooks *hooks);
/**
 * Work through every file queued in the database (vf_db_enqueue) that is not done for this
 * pipeline's model, layer and sampling, claiming one at a time, side by side with any number of
 * other workers on this or other machines (cfg.lease_s, cfg.max_attempts). Returns when nothing
 * is left and no other worker holds a file. Needs cfg.db_path; results as vf_pipeline_run
 * (file_done's file is the item's number in this run).
 */
VF_API vf_status vf_pipeline_run_queue(vf_pipeline *p, const vf_run_hooks *hooks);
/** Ask a running vf_pipeline_run() to stop soon (within one network layer). Any thread; not
 *  async-signal-safe (call it from a normal thread, not a signal handler). */
VF_API void vf_pipeline_cancel(vf_pipeline *p);
/** The model the pipeline runs (strings live as long as p). */
VF_API vf_status vf_pipeline_info(const vf_pipeline *p, vf_model_info *info);
/** The last error's text; "" if none. Borrowed. */
VF_API const char *vf_pipeline_errmsg(const vf_pipeline *p);
VF_API void vf_pipeline_free(vf_pipeline **pp);

/** Register files (or directories' media files, as the command line finds them: the caller
 *  expands them) as work in the database, for workers started by vf_pipeline_run_queue; with
 *  root, by their path relative to it. Files already queued are looked at again by the next
 *  workers. Creates the database when missing. */
VF_API vf_status vf_db_enqueue(const char *db_path, const char *root, const char *const *paths,
                               int n_paths, char *errbuf, size_t errbuf_size);

/** Copy the finished extractions of the SQLite database in_path (models, videos, vectors) into
 *  out_path (created when missing): the per-task files of a cluster run without a database
 *  server, merged. Each file once: one done in both with the same vectors is kept once; with
 *  other vectors it is a conflict, reported through conflict() (out's is kept) and counted.
 *  *merged: extractions copied. */
VF_API vf_status vf_db_merge(const char *out_path, const char *in_path,
                             void (*conflict)(void *user, const char *path, const char *sampling),
                             void *user, int64_t *merged, char *errbuf, size_t errbuf_size);

/** Describe what a database holds, one line of text per call of line() (no newline). Opens it
 *  read-only. VF_ERR_STORE when it is not a vidfeat database. */
VF_API vf_status vf_db_describe(const char *db_path, void (*line)(void *user, const char *text),
                                void *user, char *errbuf, size_t errbuf_size);

/* ---- what a database holds, as records (appended in 0.1) ------------------------------------ */

/** The counts of a database (vf_db_inspect). Strings are borrowed for the callback. */
typedef struct vf_db_summary {
    const char *database; /* the path, or the URI without its password */
    const char *engine;   /* "SQLite 3.40.1", "PostgreSQL 15.5" */
    int schema;           /* the database's schema version */
    int64_t videos, models;
    int64_t done, failed, running; /* extractions by status (running: unfinished) */
    int64_t vectors;
    /** Files queued (vf_db_enqueue) that no extraction has started yet. (Appended in 0.2.) */
    int64_t pending;
} vf_db_summary;

/** One extraction: a file by one model and layer with one sampling. */
typedef struct vf_db_extraction {
    const char *path;   /* as recorded (absolute, or relative to the run's --root) */
    const char *status; /* "done", "failed" or "running" */
    const char *model, *layer, *dtype, *sampling;
    const char *error; /* why it failed, or a done file's note; NULL when there is none */
    int dim;
    int64_t frames;
    double infer_fps; /* the network's frames/s on this file (0 when not measured) */
    /* the model file's weights as recorded: "official", "other file", "random weights";
     * NULL when not known (a plain ONNX file, or written before vidfeat recorded it) */
    const char *weights;
} vf_db_extraction;

/** One benchmark result (vidfeat bench -o). */
typedef struct vf_db_bench_run {
    const char *started_at; /* ISO 8601, UTC */
    const char *host;       /* NULL when not recorded */
    const char *device, *precision, *mode, *model, *device_name;
    int batch_size;
    double end_to_end_fps, infer_fps; /* 0 when not measured */
} vf_db_bench_run;

/** What vf_db_inspect calls: summary once, first; then extraction for each extraction (by path,
 *  then model), then run for each benchmark run in the order they were recorded. A NULL
 *  callback skips those records. */
typedef struct vf_db_visitor {
    void *user;
    void (*summary)(void *user, const vf_db_summary *s);
    void (*extraction)(void *user, const vf_db_extraction *e);
    void (*run)(void *user, const vf_db_bench_run *r);
} vf_db_visitor;

/** What a database holds, as records (vf_db_describe's lines are these, formatted). Opens it
 *  read-only, one snapshot; memory does not grow with the number of extractions. VF_ERR_STORE
 *  when it is not a vidfeat database. */
VF_API vf_status vf_db_inspect(const char *db_path, const vf_db_visitor *visitor, char *errbuf,
                               size_t errbuf_size);

/* ---- similarity search (appended in 0.1) --------------------------------------------------- */

/** What to look for: one frame, as a vector of the database's model. */
typedef struct vf_similar_query {
    /** An image (or any media file: its first frame) to take the query vector from. */
    const char *image;
    /** Or a video and a time in it, in seconds. The query is the file's stored vector nearest
     *  that time when the database has the file (by path, or another name of the same file),
     *  and that frame is left out of the hits; otherwise the frame decoded there. */
    const char *video;
    double at;
    int k; /**< neighbours wanted, 1..100000; 0 = 10 */

    /* ---- the search index (appended in 0.1) ---- */
    /** 1: read every stored vector (exact), even when an index covers the model and layer. */
    int exact;
    /** How much of the index is looked at (IVF: lists probed, the nearest first, until they hold
     *  this many lists' share of the codes; HNSW: candidates kept); 0: the index's own default.
     *  Ignored by an exact search. */
    int probe;
    /** An index file to use (vf_db_index); NULL: the one the database records for the model row
     *  searched, where its file is on this machine; none: the exact scan. */
    const char *index;
    /** (may be NULL) how the search was done, filled by vf_db_similar; with texts, an array of
     *  n_texts, one per text. */
    struct vf_similar_stats *stats;

    /* ---- search by words (appended in 0.1) ---- */
    /** Or texts (UTF-8), each a query of its own: its embedding by the text tower paired with the
     *  stored vectors' CLIP model (vf_text_encoder), answered in turn (vf_neighbour.query says
     *  which). The stored vectors must be that model's image embeddings: the models row's
     *  recorded text tower, or else the image tower beside it, must be the stored vectors'. */
    const char *const *texts;
    int n_texts;

    /* ---- sound (appended in 0.2) ---- */
    /** 1: search the database's vectors of sound (an audio model's, chosen among those rows only:
     *  the one there is, or the vf_config's model and layer); video and at then name the patch of
     *  the file's soundtrack starting nearest at (stored, else heard now). */
    int sound;
} vf_similar_query;

/** How vf_db_similar searched. */
typedef struct vf_similar_stats {
    char search[160];   /**< "exact", or "index " + the index's kind ("index IVF1024,Flat") */
    char index[4096];   /**< the index file used ("" for exact) */
    double search_ms;   /**< the search alone: not opening the database or the index, not the
                             model or the query vector */
    int64_t candidates; /**< vectors the index proposed, then ranked by their exact cosine */
    double embed_ms;    /**< texts: embedding them all (tokenizer and text tower), once */
    /** The searched vectors' model weights as the database records them (vf_weights_str:
     *  "official", "other file", "random weights"); "" when not recorded. Random weights'
     *  similarities mean nothing: vf_db_similar also says so once (a warning). */
    char weights[32];
} vf_similar_stats;

/** A stored frame, or where the query came from. Strings are borrowed (for a hit: during the
 *  callback; for the query: they are the query's own). */
typedef struct vf_neighbour {
    const char *path;
    int64_t frame_index;
    int64_t pts;       /**< in the stream's time base; 0 for an extracted query */
    double t;          /**< seconds */
    double similarity; /**< cosine similarity of the vectors, -1..1 */
    int stored;        /**< the query: 1 read from the database, 0 extracted now */
    int query;         /**< a hit of texts: which text (0..n_texts - 1); else 0 */
} vf_neighbour;

/**
 * The stored frames most similar to a query, best first: cosine similarity between feature
 * vectors of one model and layer, through a search index that covers them or every stored
 * vector read once. The query is a frame (an image, a video's frame) or texts (q->texts: each
 * text's hits in turn, vf_neighbour.query telling them apart).
 *
 * The vectors searched are the model row the database holds, or the one that cfg->model (a
 * manifest name or ONNX file; NULL: any) and cfg->layer (NULL: any) select when it holds several.
 * A query that has to be extracted runs that model with cfg's backend, precision, threads and
 * models_dir (cfg->model NULL: the row's model name), and its model file and preprocessing must
 * be the ones the stored vectors came from. The database is opened read-only, so a run may be
 * writing to it meanwhile.
 *
 * @param hit        called for each neighbour, best first (at most q->k times).
 * @param query_out  (may be NULL) receives where the query vector came from.
 * @return VF_OK; VF_ERR_INVALID (bad query or options), VF_ERR_STORE (database missing,
 *         unreadable, without vectors, or holding several models that cfg does not tell apart),
 *         VF_ERR_MODEL (the model file differs from the vectors'; texts: the stored vectors are
 *         not a CLIP model's image embeddings, or its text tower does not pair with them),
 *         VF_ERR_DECODE / VF_ERR_IO (the query cannot be read), or any status of
 *         vf_pipeline_create or vf_text_encoder_create. The message is in errbuf.
 */
VF_API vf_status vf_db_similar(const char *db_path, const vf_config *cfg, const vf_similar_query *q,
                               void (*hit)(void *user, const vf_neighbour *n), void *user,
                               vf_neighbour *query_out, char *errbuf, size_t errbuf_size);

/* ---- reading vectors back (appended in 0.1) ------------------------------------------------ */

/** What the vectors vf_db_read_vectors reads are: one model row of the database. Strings are
 *  borrowed during the callback. */
typedef struct vf_db_model {
    const char *name;          /**< the model's name (a manifest name, or the ONNX file's) */
    const char *layer;         /**< the feature layer */
    const char *file_sha256;   /**< the model file's SHA-256, hex */
    const char *preprocessing; /**< size, resize, channel order, mean/std, pooling, conversion */
    int dim;                   /**< floats per vector */
    int f16;                   /**< stored as float16 (read back as floats) */
    int64_t vectors;           /**< how many it holds, done or not */
    /** A clip model's frames per window, an audio model's log-mel frames per patch: its
     *  vectors are spans of time (vf_db_vector.t_end set); 0 for an image model. (Appended in
     *  0.2.) */
    int frames;
} vf_db_model;

/** One shot of a file (docs/shots.md): frames first_frame..last_frame, from start to end in
 *  seconds (end: the next shot's start; the last one's, the end of its last frame). */
typedef struct vf_db_shot {
    int64_t first_frame, last_frame;
    double start, end;
} vf_db_shot;

/** One stored vector of a done extraction. Strings and vec are borrowed during the callback. */
typedef struct vf_db_vector {
    const char *path;     /**< the file, as recorded (docs/output.md) */
    const char *sampling; /**< how its frames were chosen ("all", "fps=1", ...) */
    int64_t frames;       /**< the vectors of this file and sampling (a run of calls) */
    int64_t frame_index;  /**< the frame's number in presentation order */
    int64_t pts;          /**< in the stream's time base */
    double t;             /**< seconds (a window: its first frame's) */
    const float *vec;     /**< dim floats */
    /** A clip model's window: its last frame's seconds; NaN for a frame's vector. (Appended
     *  in 0.2.) */
    double t_end;
    /** The file's shots where they were found (`--shots`), in order, the same on each of its
     *  vectors; NULL and 0 when none were. Borrowed during the callback. (Appended in 0.3.) */
    const vf_db_shot *shots;
    int n_shots;
} vf_db_vector;

/**
 * Read back every vector of one model and layer: the row the database holds, or the one
 * cfg->model (a manifest name or ONNX file; NULL: any) and cfg->layer (NULL: any) select. model()
 * is called once with the row, then vector() for each vector of a done extraction: files by
 * path (byte order), then sampling; each file's vectors by frame index, `frames` calls in a row.
 * One snapshot of the database, opened read-only (a run may be writing meanwhile); memory does
 * not grow with its size. A callback returning nonzero stops the reading (VF_ERR_CANCELLED).
 * @return VF_OK; VF_ERR_INVALID, VF_ERR_STORE (database missing, unreadable, without vectors, or
 *         holding several models that cfg does not tell apart: the message lists them),
 *         VF_ERR_CANCELLED, VF_ERR_NOMEM. The message is in errbuf.
 */
VF_API vf_status vf_db_read_vectors(const char *db_path, const vf_config *cfg,
                                    int (*model)(void *user, const vf_db_model *m),
                                    int (*vector)(void *user, const vf_db_vector *v), void *user,
                                    char *errbuf, size_t errbuf_size);

/* ---- search indexes (appended in 0.1; docs/search.md "Searching an archive") ----------------- */

/** How vf_db_index builds an index, or brings one up to date. */
typedef struct vf_index_opts {
    /** "auto" (NULL: the same), "flat" (exact), "hnsw", "ivf" (IVF over the vectors as they are),
     *  "ivfpq" (IVF with product quantisation and a PCA rotation: the compact kind), or FAISS's
     *  index_factory words ("IVF4096,PQ64"). "auto": exact up to 50,000 vectors, "ivfpq" beyond
     *  (docs/search.md "Searching an archive" says why, with numbers). An index that
     *  exists keeps its kind (a different explicit one: VF_ERR_INVALID unless rebuild). */
    const char *kind;
    /** The index file; NULL: beside an SQLite database, DB.MODEL.LAYER.faiss (a PostgreSQL
     *  database needs one). */
    const char *path;
    int rebuild; /**< 1: start over instead of adding and removing what changed */
    /** (may be NULL) called as vectors are read: (done, total); nonzero stops the build
     *  (VF_ERR_CANCELLED, nothing written). */
    int (*progress)(void *user, int64_t done, int64_t total);
    void *user;
} vf_index_opts;

/** What vf_db_index did. */
typedef struct vf_index_report {
    char path[4096];                /**< the index file (absolute) */
    char kind[160];                 /**< FAISS's words for it */
    int created;                    /**< 1: built anew; 0: an existing index brought up to date */
    int64_t vectors, files;         /**< what it holds now */
    int64_t added, removed;         /**< vectors added, and taken out (or hidden: HNSW) this time */
    int64_t bytes;                  /**< the file's size */
    double train_s, add_s, seconds; /**< training, adding, the whole call */
} vf_index_report;

/**
 * Build a search index over the vectors of one model and layer (the row cfg->model and
 * cfg->layer choose, as vf_db_similar's), or bring the one at the path up to date: the done
 * extractions it lacks are added, the ones the database no longer holds done are removed.
 * Written under a temporary name and renamed when whole, then recorded in the database (which
 * must be writable), so that vf_db_similar finds it. The vectors are read once (twice when the
 * kind needs training, on a sample). Memory: the index, and one batch of vectors.
 * @return VF_OK; VF_ERR_STORE (the database: missing, no vectors, several rows cfg does not
 *         tell apart, or not writable; an index file that is damaged), VF_ERR_INVALID (an index
 *         file of another model, layer or kind; a kind FAISS refuses), VF_ERR_IO (the file
 *         cannot be written), VF_ERR_CANCELLED, VF_ERR_NOMEM. The message, naming the file, is in
 *         errbuf.
 */
VF_API vf_status vf_db_index(const char *db_path, const vf_config *cfg, const vf_index_opts *o,
                             vf_index_report *out, char *errbuf, size_t errbuf_size);

/** A search index a database records, and how current it is (vf_db_indexes). Strings are
 *  borrowed during the callback. */
typedef struct vf_db_index_info {
    const char *path, *model, *layer, *kind, *built_at, *host;
    int64_t vectors, files;             /**< what it held when built */
    int present;                        /**< its file is on this machine and readable */
    const char *problem;                /**< why it cannot be used (NULL: it can) */
    int64_t lacks_vectors, lacks_files; /**< done in the database, not in the index */
    int64_t gone_vectors, gone_files;   /**< in the index, no longer done in the database */
} vf_db_index_info;

/** Each search index db records, with how current it is against the database now (the file is
 *  read for that where it is on this machine: its header, not the whole index). */
VF_API vf_status vf_db_indexes(const char *db_path,
                               void (*index)(void *user, const vf_db_index_info *ix), void *user,
                               char *errbuf, size_t errbuf_size);

/* ---- reuse detection (appended in 0.1; docs/search.md "Finding reused footage") -------------- */

/** Where to look for reused footage. */
typedef struct vf_match_query {
    /** A file whose footage to look for elsewhere in the archive: its stored vectors when the
     *  database holds it (by path or another name of the same file), else its frames extracted
     *  now with the database's model, sampled as cfg says (sample_fps, every; default: every
     *  frame). NULL: every file the database holds against every other. */
    const char *video;
    double min_duration;   /**< seconds a match must last; 0 = 2 */
    double min_similarity; /**< cosine a frame must reach with its counterpart; 0 = 0.8 */
    /** 1: compare with every stored vector (an exact index made in memory), even where an index
     *  file covers the model and layer. Without an index file this is what is done. */
    int exact;
    int probe;         /**< as vf_similar_query's */
    const char *index; /**< as vf_similar_query's */
    /** (may be NULL) how the search was done, filled by vf_db_matches. */
    struct vf_match_stats *stats;
} vf_match_query;

/** How vf_db_matches searched. */
typedef struct vf_match_stats {
    char search[160]; /**< "exact" (every stored vector) or "index " + the index's kind */
    char index[4096]; /**< the index file used ("" for exact) */
    int64_t frames;   /**< query frames searched */
    int64_t flat;     /**< of those, frames that show nothing (uniform, black): no evidence */
    int flat_known;   /**< 0: the model file was not found, so flat frames were not told */
    int64_t pairs;    /**< pairs of files whose frames were compared along a time line */
    double search_ms; /**< the nearest-neighbour search of every query frame */
    double align_ms;  /**< aligning the pairs' frame matches in time */
    char weights[32]; /**< as vf_similar_stats' (vf_db_matches warns as vf_db_similar) */
} vf_match_stats;

/** Footage of one file shown in another: a's [a_start, a_end] is b's [b_start, b_end]
 *  (seconds: the first and last matching frames' times). Strings borrowed for the call. */
typedef struct vf_match {
    const char *a, *b;
    double a_start, a_end, b_start, b_end;
    double score;   /**< the mean cosine of the matching frames */
    double speed;   /**< b's seconds per a's second (1: the same speed) */
    int64_t frames; /**< a's frames that matched */
    /** Each file's extent as extracted: its last stored frame's time (seconds), so that a
     *  segment can be drawn against the whole file (appended in 0.2). */
    double a_length, b_length;
} vf_match;

/**
 * Reused footage: pairs of files where one shows footage of the other, found by aligning frame
 * matches in time (a line of matching frames, not single frames; frames that show nothing are no
 * evidence). The vectors are one model row's (cfg->model, cfg->layer choose, as vf_db_similar's);
 * every query frame's nearest stored frames come from the index file that covers the row, else
 * from an exact index made in memory (which needs the row's vectors to fit in half of memory).
 * Whole-archive searches (q->video NULL) hold the row's vectors in memory.
 * @param match  called for each match: with q->video, best first, a being the query; without,
 *               by a's path then time, each pair of files once.
 * @return VF_OK; VF_ERR_INVALID (bad query), VF_ERR_STORE (database or index file as
 *         vf_db_similar's), VF_ERR_NOMEM (the vectors do not fit), the query file's errors
 *         (VF_ERR_DECODE, VF_ERR_IO, VF_ERR_MODEL). The message is in errbuf.
 */
VF_API vf_status vf_db_matches(const char *db_path, const vf_config *cfg, const vf_match_query *q,
                               void (*match)(void *user, const vf_match *m), void *user,
                               char *errbuf, size_t errbuf_size);

/* ---- a web page over a database (appended in 0.2; docs/serve.md) ---------------------------- */

/** How vf_server_start serves a database. */
typedef struct vf_serve_opts {
    /** Files are served (played, thumbnailed) only when the database holds vectors of them and
     *  they are under this directory, links resolved; a recorded relative path is relative to
     *  it. NULL: the current directory. */
    const char *root;
    const char *bind; /**< the address to listen on; NULL: 127.0.0.1 (this machine only) */
    int port;         /**< 0: any free port (vf_server_port says which) */
    /** The token a client must present (a cookie the page sets from ?token=, or a header
     *  "Authorization: Bearer TOKEN") when bind is not a loopback address; NULL: one is made at
     *  random (vf_server_token). With a loopback bind a token given here is required too. */
    const char *token;
    /** 1: no token off loopback either (anyone who reaches the port can search and watch). */
    int no_auth;
    int64_t max_upload;  /**< bytes of an uploaded query image; 0: 32 MiB */
    int64_t thumb_cache; /**< bytes of thumbnails kept in memory; 0: 64 MiB */
    /** Requests are answered only when addressed (their Host) to bind's address (any of the
     *  machine's when bind is 0.0.0.0 or ::), to localhost, or to one of these host names,
     *  comma-separated (a name of this machine that browsers use); NULL: none. Others: 403. */
    const char *allow_hosts;
} vf_serve_opts;

typedef struct vf_server vf_server;

/**
 * Serve db over HTTP: the page (search by words, by an uploaded image, "more like this", reused
 * footage, the archive's progress) and its JSON API, whose documents are the command line's
 * --json ones (docs/serve.md). The database is opened read-only, per request, so runs may write
 * it meanwhile. cfg chooses the model row as vf_db_similar's (cfg->model, cfg->layer) and the
 * backend, threads and models_dir for queries that need the model. Returns once listening; the
 * server runs on threads of its own until vf_server_stop.
 * @return VF_OK; VF_ERR_INVALID (options), VF_ERR_IO (cannot listen), VF_ERR_STORE (the
 *         database). The message is in errbuf.
 */
VF_API vf_status vf_server_start(const char *db, const vf_config *cfg, const vf_serve_opts *o,
                                 vf_server **out, char *errbuf, size_t errbuf_size);
/** The port it listens on. */
VF_API int vf_server_port(const vf_server *srv);
/** The token clients must present, or NULL when none is asked. Borrowed. */
VF_API const char *vf_server_token(const vf_server *srv);
/** Stop serving: requests running are finished, connections closed, uploads removed. */
VF_API void vf_server_stop(vf_server **psrv);

/** 1 if FFmpeg can open path and it has a video stream (probes the content, not the name);
 *  0 for text files FFmpeg would read as text art (.nfo, some .txt). */
VF_API int vf_probe_media(const char *path);

/** db as messages may show it: a URI without its password (anything else as it is), in buf. */
VF_API const char *vf_db_display(const char *db, char *buf, size_t size);
/** 1 when db is a URI that holds a password (other users can read a command line), else 0. */
VF_API int vf_db_has_password(const char *db);
/** 1 when db names a database server (a URI: "postgresql://..."), 0 for a file. */
VF_API int vf_db_is_server(const char *db);

/** For a program about to search (build or query indexes): start it again (execv of itself with
 *  argv) with OpenBLAS's kernels for this CPU where the installed OpenBLAS misjudges it (its
 *  SSE3 kernels on AVX-512 machines: 2-3x slower). Returns when nothing needs doing, the
 *  environment already says, or it could not. */
VF_API void vf_search_restart(char **argv);

/** One benchmark configuration's result, as `vidfeat bench -o DB` records it (the database's
 *  runs, read back by vf_db_inspect()). Strings are borrowed; a NULL one is stored as SQL null
 *  (device, model, precision and mode are expected). Rates are frames/s; 0 (or any value that
 *  is not a measurement: negative, NaN) means "not measured" and is stored as null. */
typedef struct vf_bench_record {
    const char *device;      /**< "cpu" or "gpu" */
    const char *device_name; /**< e.g. the CPU's model name */
    const char *backend;     /**< "dnnl", "ref", "cuda" */
    const char *model, *layer;
    const char *precision;
    const char *mode;  /**< "pipeline", "per_frame", "infer_only" */
    const char *input; /**< the video benchmarked; NULL for infer_only */
    int batch_size, threads;
    int64_t frames;
    double end_to_end_fps, decode_fps, convert_fps, infer_fps, store_fps;
    double peak_rss_mb;
} vf_bench_record;

/** Append r to the database's benchmark runs with the time, this host's name and vidfeat's
 *  version (the database created, or brought to the current schema, as -o does). */
VF_API vf_status vf_db_add_bench(const char *db_path, const vf_bench_record *r, char *errbuf,
                                 size_t errbuf_size);

/** How vf_inputs_collect() reads a run's arguments (the command's --root, --files-from,
 *  --shard and -v). Zeroed: none of them. */
typedef struct vf_inputs_opts {
    const char *root;         /**< walks stay inside this directory (an archive); NULL: none */
    int follow_links_outside; /**< links leading out of root are followed */
    const char *files_from;   /**< a list of paths, one a line ("-": standard input), or NULL */
    int nul_separated;        /**< the list's paths end with NUL, not a newline */
    int shard_k, shard_n;     /**< keep shard k (0-based) of n, by recorded name; n 0: all */
    int verbose;              /**< also say which files a walk passes over (not media) */
    /** each problem (or, verbose, remark) as one line without a newline ("PATH: no media files
     *  in this directory"); NULL: vidfeat's log (vf_set_log_callback), as warnings */
    void (*say)(void *user, const char *line);
    void *user;
} vf_inputs_opts;

/**
 * The files a run of args takes, as the command takes them: a file as it is (one that does not
 * exist too: the run fails it with its line), a directory walked for media (in name order, each
 * real directory and file once, links followed, media recognised by probing; media that will not
 * give frames kept for the run to fail, other files passed over), then o->files_from's paths,
 * then o->shard_k of o->shard_n. With o->root, nothing outside it is walked or probed.
 * @param paths   receives n_paths new strings (free with vf_inputs_free())
 * @param failed  set to 1 when some input could not be taken (each said through o->say)
 * @return VF_OK, or VF_ERR_NOMEM.
 */
VF_API vf_status vf_inputs_collect(const char *const *args, int n_args, const vf_inputs_opts *o,
                                   char ***paths, int *n_paths, int *failed);
VF_API void vf_inputs_free(char **paths, int n_paths);

/** The name a database records the file at path under, into buf: relative to root when given
 *  (so that machines mounting an archive at different places record its files alike), else its
 *  absolute path. VF_ERR_INVALID (errbuf says why) for a path outside root or a name longer than
 *  size, VF_ERR_NOMEM. */
VF_API vf_status vf_input_name(const char *path, const char *root, char *buf, size_t size,
                               char *errbuf, size_t errbuf_size);

/** A time or duration as FFmpeg's tools take one: seconds ("90", "1.5", "500ms") or
 *  [[HH:]MM:]SS[.frac] ("1:30", "01:02:03.5"), into seconds (negative when it starts with '-').
 *  VF_ERR_INVALID when text is none of these. */
VF_API vf_status vf_parse_time(const char *text, double *seconds);

/** One known model, as listed by vf_model_list(). Strings borrowed from the list. */
typedef struct vf_model_entry {
    const char *name;
    const char *manifest; /**< the JSON manifest's path */
    const char *file;     /**< the ONNX file name the manifest names */
    const char *found;    /**< where the ONNX file was found, or NULL if nowhere */
    const char *layers;   /**< "fc7:4096 pool5:512", default first */
    const char *description;
    int input_size;
    vf_weights_kind weights; /**< of the file found (VF_WEIGHTS_UNKNOWN when none is) */
    /** How to get the file: "scripts/fetch-models.sh NAME" where the manifest has a download
     *  address, else its export command. (Appended in 0.1.) */
    const char *get;
    /** A CLIP model: its text tower's file name, and where it was found (NULL if nowhere);
     *  NULL for other models. (Appended in 0.1.) */
    const char *text_file;
    const char *text_found;
    /** A clip model: the frames of one window (its manifest's); 0 for an image model.
     *  (Appended in 0.2.) */
    int frames;
    /** An audio model (input_size 0): the sample rate its front end takes, and the seconds of
     *  sound one vector covers; 0 for image and clip models. (Appended after frames.) */
    int sample_rate;
    double patch_seconds;
} vf_model_entry;

typedef struct vf_model_list vf_model_list;

/**
 * Collect the known models (manifests) from @p models_dir (may be NULL), $VIDFEAT_MODELS, ./models
 * and the installed models directory; the first manifest of each name wins. Sorted by name.
 * Free with vf_model_list_free().
 */
VF_API vf_status vf_model_list_create(const char *models_dir, vf_model_list **out);
VF_API size_t vf_model_list_count(const vf_model_list *list);
VF_API const vf_model_entry *vf_model_list_get(const vf_model_list *list, size_t i);
VF_API void vf_model_list_free(vf_model_list **plist);

/** Where manifests and model files are looked for, in order, as vf_model_list_create and a run
 *  look (models_dir may be NULL): directory names joined by ':' into buf (truncated to size).
 *  Returns the length the whole list needs. An installed vidfeat looks in its installation,
 *  never in the tree it was built from. (Appended in 0.1.) */
VF_API size_t vf_models_search_path(const char *models_dir, char *buf, size_t size);

/** Static text for a status ("model error", ...). Any thread. */
VF_API const char *vf_status_str(vf_status s);
/** "MAJOR.MINOR.PATCH" of the library actually linked. Any thread. */
VF_API const char *vf_version(void);
/** Write the compiled-in backends and library versions into buf, one "name: value" per line
 *  (truncated to size). Returns buf. Any thread. */
VF_API char *vf_build_info(char *buf, size_t size);
/** 1 if the named feature is compiled in ("dnnl", "cuda", "ref"), or for "bf16" if this CPU runs
 *  bf16 on the CPU backend (AVX512-BF16 or AMX, under the cap VIDFEAT_ISA or ONEDNN_MAX_CPU_ISA
 *  sets), else 0. Any thread. */
VF_API int vf_has_feature(const char *name);
/** Parse a precision's name, case-insensitive: "f32" (or "fp32", "float32"), "bf16"
 *  ("bfloat16"), "f16" ("fp16", "float16"), "tf32", "int8" ("i8"), "auto". VF_ERR_INVALID for
 *  anything else. */
VF_API vf_status vf_precision_parse(const char *text, vf_precision *out);
/** The name of each precision: "f32", "bf16", "f16", "tf32", "int8", "auto". */
VF_API const char *vf_precision_str(vf_precision p);

/** "official", "other file", "random weights" or "unknown". */
VF_API const char *vf_weights_str(vf_weights_kind w);

/* ---- the JSON documents (appended in 0.2; docs/output.md) ------------------------------------ */

/** A record the callbacks above give, as the command's --json writes it. */
typedef enum vf_doc_kind {
    VF_DOC_NEIGHBOUR = 0,  /**< a vf_neighbour (vf_db_similar), at place rank (from 1) */
    VF_DOC_MATCH = 1,      /**< a vf_match (vf_db_matches) */
    VF_DOC_SUMMARY = 2,    /**< a vf_db_summary (vf_db_inspect) */
    VF_DOC_EXTRACTION = 3, /**< a vf_db_extraction (vf_db_inspect) */
    VF_DOC_BENCH_RUN = 4,  /**< a vf_db_bench_run (vf_db_inspect) */
    VF_DOC_INDEX = 5,      /**< a vf_db_index_info (vf_db_indexes) */
    VF_DOC_MATCHES = 6,    /**< a vf_match_stats: matches' document, its "matches" empty */
} vf_doc_kind;

/**
 * The JSON text of @p record (of @p kind; rank for a neighbour) as the command's --json gives
 * it: one object on one line, names that are not UTF-8 escaped losslessly (docs/output.md), so
 * that a binding reading records through callbacks says exactly what the command says. A new
 * string (vf_doc_free), or NULL when out of memory or for an unknown kind. Any thread.
 */
VF_API char *vf_doc_json(vf_doc_kind kind, const void *record, int rank);
/** similar's document with its "neighbours" empty: the query is {"text": text} (and
 *  "embed_ms" is set) when text is given, else src's. As vf_doc_json. */
VF_API char *vf_doc_similar_json(const vf_neighbour *src, const char *text,
                                 const vf_similar_stats *stats);
/** Free a vf_doc_json / vf_doc_similar_json string (NULL: nothing). */
VF_API void vf_doc_free(char *text);

/** Log levels, most severe first. */
enum { VF_LOG_ERROR = 0, VF_LOG_WARNING = 1, VF_LOG_INFO = 2, VF_LOG_DEBUG = 3 };

typedef void (*vf_log_fn)(void *user, int level, const char *tag, const char *msg);

/**
 * Send the library's log lines to @p fn instead of stderr; NULL restores stderr. Lines above
 * @p max_level are dropped. Set it once, before creating handles.
 */
VF_API void vf_set_log_callback(vf_log_fn fn, void *user, int max_level);

#ifdef __cplusplus
}
#endif

#endif /* VIDFEAT_H */
